"""Input layer: read edge lists and update batches into validated numpy arrays.

Every reader accepts a file path (SNAP/plain text, CSV, Parquet or Arrow IPC; text and CSV
optionally compressed) or an in-memory source (numpy array, mapping of columns,
``pyarrow.Table`` / ``RecordBatch``, ``pandas.DataFrame``, a cuDF or Polars DataFrame
(anything with ``to_arrow()``), tuple of columns, list of row tuples, networkx graph) and
returns plain numpy arrays:

* node ids are ``int64``, or ``object`` arrays of ``str`` when the keys are strings;
* signs, multiplicities and timestamps are ``int64``; relation codes are ``int8``.

Every problem with the input raises :class:`gpu_ivm.errors.InputError` naming the column,
the 0-based index of the first offending row and, for text and CSV files, its 1-based line.
Columns a reader does not use are ignored with a :class:`gpu_ivm.errors.InputNote` warning.

Modules: :mod:`.readers` (the public readers), :mod:`.files` (formats, compression, Parquet
and Arrow IPC), :mod:`.text` (text and CSV files), :mod:`.header` (the header rule),
:mod:`.layout` (which columns a reader takes), :mod:`.sources` (in-memory sources),
:mod:`.columns` (conversion and validation), :mod:`.ids` (integer or string ids),
:mod:`.batches` (batch folders), :mod:`.results` (the returned types).
"""

from .batches import BATCH_EXTENSIONS, list_batch_files
from .readers import (
    TableSource,
    read_edges,
    read_graph_updates,
    read_relation,
    read_relation_updates,
)
from .results import EdgeList, GraphUpdates, RelationUpdates

__all__ = [
    "BATCH_EXTENSIONS",
    "EdgeList",
    "GraphUpdates",
    "RelationUpdates",
    "TableSource",
    "list_batch_files",
    "read_edges",
    "read_graph_updates",
    "read_relation",
    "read_relation_updates",
]
