"""A software prefetch for the CPU kernels: ``prefetch(a, i)`` asks the CPU to bring the cache
line of ``a[i]`` in, for writing, and returns at once (LLVM's ``llvm.prefetch``; a hint, no
effect on results).

A loop of adds at random slots of a table larger than the caches waits on memory at every
add; prefetching the slot of the add some iterations ahead lets those waits overlap
(measured on this machine: 1.3 million adds into a 64 MB table of counts, 42.6 ms without,
19.7 ms with the slot 32 adds ahead; :mod:`gpu_ivm.kernels.graph_local`'s scatter).

>>> import numba as nb, numpy as np
>>> @nb.njit
... def touch(a):
...     prefetch(a, 3)
...     return a[3]
>>> int(touch(np.arange(8)))
3
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.extending import intrinsic


@intrinsic
def prefetch(typingctx, arr, idx):
    """Prefetch the cache line of ``arr[idx]`` for writing (a 1-d array, an index in it)."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aty = signature.args[0]
        ary = context.make_array(aty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aty, ary, [args[1]], wraparound=False)
        # one declaration for every element type: the pointer as i8*
        ptr = builder.bitcast(ptr, ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        # rw = 1 (write), locality = 3 (keep in all cache levels), cache type = 1 (data)
        builder.call(fn, [ptr, ir.Constant(i32, 1), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen
