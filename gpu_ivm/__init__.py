"""gpu_ivm: exact incremental maintenance of triangle queries under batches of updates.

The engines implement IVM^ε (Kara, Ngo, Nikolic, Olteanu, Zhang): heavy/light partitioning by
degree with threshold N^ε, skew-aware materialized views and amortized rebalancing, applied to
whole batches with vectorized Numba kernels.

>>> import gpu_ivm
>>> g = gpu_ivm.GraphEngine(epsilon="1/2")
>>> _ = g.load({"src": [0, 1, 2], "dst": [1, 2, 0]})
>>> g.count()
1
>>> gpu_ivm.count_triangles(([0, 1, 2, 2], [1, 2, 0, 3]))
1
"""

from __future__ import annotations

import os as _os

# Numba's OpenMP workers: how long they spin after a parallel kernel before they sleep. An
# unbounded spin slowed batches 3x on a busy machine (Spark executors, another process on the
# cores), so the policy is passive; but a sleeping worker takes 50-80 us to wake, paid by
# every parallel kernel of a batch (docs/design.md, "OpenMP waiting policy"). With GNU
# OpenMP, GOMP_SPINCOUNT bounds the spin (30,000 spins, about 0.5 ms here): the kernels of one
# batch find the worker awake, an idle engine costs nothing. A value the user set wins. Set
# before any kernel runs.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
_os.environ.setdefault("GOMP_SPINCOUNT", "30000")

# Compiled kernels are cached in a folder keyed by their sources (see kernel_cache): Numba's own
# check misses changes in the modules a kernel calls. Set before any kernel is defined.
from .kernel_cache import configure as _configure_kernel_cache

_configure_kernel_cache()

# insert_only registers GraphEngine's insert-only / auto modes and their snapshot format,
# insert_only_relations RelationEngine's
from . import cq, insert_only, insert_only_relations  # noqa: F401
from ._version import __version__
from .backend import Backend, get_backend
from .engine import BatchReport
from .errors import (
    BackendUnavailableError,
    ConflictError,
    GpuIvmError,
    InputError,
    IntegerOverflowError,
    InvariantError,
    ResourceLimitError,
)
from .graph_engine import GraphEngine
from .relation_engine import RelationEngine
from .sliding_window import SlidingWindow
from .snapshot import SnapshotError
from .static import (
    count_triangles,
    edge_triangle_counts,
    list_triangles,
    vertex_triangle_counts,
)
from .window_device import DeviceSlidingWindow

__all__ = [
    "Backend",
    "BackendUnavailableError",
    "BatchReport",
    "ConflictError",
    "DeviceSlidingWindow",
    "GpuIvmError",
    "GraphEngine",
    "InputError",
    "IntegerOverflowError",
    "InvariantError",
    "RelationEngine",
    "ResourceLimitError",
    "SlidingWindow",
    "SnapshotError",
    "count_triangles",
    "cq",
    "edge_triangle_counts",
    "list_triangles",
    "vertex_triangle_counts",
    "get_backend",
    "__version__",
]
