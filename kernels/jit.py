"""The compile options of the kernels' inner helpers.

Every store is passed to the kernels as the tuple of arrays of
:meth:`gpu_ivm.store.ZStore.nt`. A Numba function that takes such a tuple acquires a reference
to each array it reads on entry and releases it on exit (NRT reference counts, one atomic
operation each): on a store tuple about 60 atomic operations per call, on arrays that every
thread shares. The row helpers run once per pair or per row, so that bookkeeping cost more
than their work: a call of ``probe_marks`` on a two-entry row took 225 ns with reference
counting and 47 ns without (one-off script, one thread); with two threads the shared
counts' cache lines travel between the cores on every call as well.

:data:`helper` compiles a function without NRT reference counting. It is for functions that
read and write arrays they are given and allocate nothing (a helper that allocates fails to
compile); the arrays stay owned, and kept alive, by the kernel that called them.
"""

from __future__ import annotations

import numba as nb

#: ``@helper``: ``numba.njit(cache=True)`` without reference counting (see the module docstring)
helper = nb.njit(cache=True, _nrt=False)
