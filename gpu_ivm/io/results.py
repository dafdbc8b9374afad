"""The results the readers return: validated numpy arrays with named fields."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class EdgeList:
    """A static edge list.

    Attributes
    ----------
    src, dst : numpy.ndarray
        Endpoint ids: ``int64``, or ``object`` arrays of ``str`` when the keys are strings.
        Both have the same dtype.
    time : numpy.ndarray or None
        ``int64`` timestamps when the source had a time column (SNAP ``u v t``), else None.
    """

    src: np.ndarray
    dst: np.ndarray
    time: np.ndarray | None = None

    @property
    def keys_are_strings(self) -> bool:
        """True when the node ids are strings (``object`` arrays), False for ``int64``."""
        return self.src.dtype == object

    def __len__(self) -> int:
        return int(self.src.shape[0])


@dataclass(frozen=True, eq=False)
class GraphUpdates:
    """A batch of edge inserts (``sign == +1``) and deletes (``sign == -1``).

    Attributes
    ----------
    src, dst : numpy.ndarray
        Endpoint ids, ``int64`` or ``object`` arrays of ``str`` (same dtype).
    sign : numpy.ndarray
        ``int64``, each value +1 or -1.
    """

    src: np.ndarray
    dst: np.ndarray
    sign: np.ndarray

    def __len__(self) -> int:
        return int(self.src.shape[0])


@dataclass(frozen=True, eq=False)
class RelationUpdates:
    """A batch of multiplicity changes to the three relations R, S and T.

    Attributes
    ----------
    rel : numpy.ndarray
        ``int8`` relation codes: 0 = R, 1 = S, 2 = T.
    src, dst : numpy.ndarray
        Tuple attributes, ``int64`` or ``object`` arrays of ``str`` (same dtype).
    mult : numpy.ndarray
        ``int64`` multiplicity changes. Rows with 0 are kept (the engine drops them).
    """

    rel: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    mult: np.ndarray

    def __len__(self) -> int:
        return int(self.src.shape[0])
