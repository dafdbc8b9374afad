"""Exceptions raised by gpu_ivm.

Every error caused by the caller's input derives from :class:`InputError` (a ``ValueError``),
names the offending column and the first offending row where there is one, and is raised
before any state changes.
"""

from __future__ import annotations


class GpuIvmError(Exception):
    """Base class of every gpu_ivm error."""


class InputError(GpuIvmError, ValueError):
    """Bad input: wrong or missing columns, nulls, bad values, unreadable files.

    Attributes
    ----------
    column : str or None
        The column at fault, when one is.
    row : int or None
        The 0-based index of the first offending row in the input, when one is.
    option : str or None
        The command-line option at fault (e.g. ``"--resume"``), when one is.
    line : int or None
        The 1-based line of a text or CSV file that holds that row, when there is one.
    detail : str
        The message without the option/column/row/line suffix.

    Examples
    --------
    >>> str(InputError("no such column", column="sign", row=3))
    "no such column (column 'sign', row 3)"
    >>> str(InputError("must be at least 1", option="--snapshot-every"))
    'must be at least 1 (option --snapshot-every)'
    >>> str(InputError("not an integer", column="dst", row=2, line=3))
    "not an integer (column 'dst', row 2, line 3 (1-based))"
    """

    def __init__(
        self,
        message: str,
        *,
        column: str | None = None,
        row: int | None = None,
        line: int | None = None,
        option: str | None = None,
    ):
        where = []
        if option is not None:
            where.append(f"option {option}")
        if column is not None and not _names_column(message, column):
            where.append(f"column {column!r}")
        if row is not None:
            where.append(f"row {row}")
        if line is not None:
            where.append(f"line {line} (1-based)")
        full = f"{message} ({', '.join(where)})" if where else message
        super().__init__(full)
        self.detail = message
        self.column = column
        self.row = row
        self.option = option
        self.line = line


def _names_column(message: str, column: str) -> bool:
    """True when the message opens by naming the column ("missing column 'x'; ..."), which
    then is not named a second time in the suffix."""
    head, _, rest = message.partition(" column ")
    return " " not in head and rest.startswith(repr(column))


class InputNote(UserWarning):
    """A note about an input that was read, e.g. columns that were ignored.

    Emitted with :func:`warnings.warn`; the command line prints it as ``gpu-ivm: note: ...``.
    """


class ConflictError(InputError):
    """A set-semantics conflict: inserting a present edge or deleting an absent one."""


class SetViolation(Exception):
    """Internal (never reaches the user): a batch applied ahead of its set-semantics check
    broke set semantics and was stopped before it changed anything; the engine applies it
    again, checked first, which raises :class:`ConflictError` or skips the rows."""


class IntegerOverflowError(GpuIvmError, OverflowError):
    """A multiplicity, view entry or count would leave the int64 range."""


class BackendUnavailableError(GpuIvmError, RuntimeError):
    """The requested backend cannot run here (e.g. ``cuda`` without a usable device)."""


class InvariantError(GpuIvmError, AssertionError):
    """A structural invariant of the IVM state does not hold (raised by check_invariants)."""


class ResourceLimitError(GpuIvmError, MemoryError):
    """The state would not fit in the memory budget (``GPU_IVM_MEMORY_LIMIT`` or 80 % of the
    memory available when the engine checks); raised before the allocation, not after."""
