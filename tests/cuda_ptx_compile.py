"""Compile every CUDA kernel of gpu_ivm to PTX for sm_90 (Hopper); optionally assemble it.

Run by ``tests/test_cuda_ptx.py`` with an interpreter that has NVIDIA's numba-cuda (the built-in
``numba.cuda`` and the simulator cannot compile PTX)::

    PY -m pip install "numba-cuda[cu12]"          # in a scratch venv, not the project venv
    PY tests/cuda_ptx_compile.py /work/main [OUTDIR]

No driver is needed, except that numba-cuda asks the current device for its compute capability
when it compiles the ``njit`` callees (``find``, ``dot_rows``...) as device functions; a
stand-in answers (9, 0). With OUTDIR the PTX files are written there (``ptxas -arch=sm_90``
assembles them). Prints one line per kernel and exits non-zero on the first failure.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from numba import cuda, typeof


class _Hopper:
    compute_capability = (9, 0)


def cases(repo: str) -> dict:
    """Every kernel of the cuda kernel set with example arguments of the right types."""
    import numba.cuda.dispatcher as dispatcher

    dispatcher.get_current_device = lambda: _Hopper()
    sys.path.insert(0, repo)
    from kernels import cuda_batch_prep as bp
    from kernels import cuda_delta as d
    from kernels import cuda_graph_listing as gl
    from kernels import cuda_graph_local as gv
    from kernels import cuda_hash as h
    from kernels import cuda_insert_adj as ia
    from kernels import cuda_launch as launch
    from kernels import cuda_lex as lex
    from kernels import cuda_lex_join as lj
    from kernels import cuda_offline as off
    from kernels import cuda_phase as ph
    from kernels import cuda_query as q
    from kernels import cuda_select as sel
    from kernels import cuda_static as t
    from kernels import cuda_store as s
    from kernels import cuda_window as w
    from kernels import cuda_window_step as ws

    i = np.zeros(4, np.int64)
    b = np.zeros(4, np.bool_)
    u = np.zeros(4, np.uint8)  # heavy/light flags of the free queries
    k = np.zeros(0, np.int8)  # the count kernel's (empty) row marks
    m = np.zeros((2, 4), np.int64)
    bits = np.zeros((1, 1), np.uint64)  # row bitmaps: slots x words
    st = (i,) * 11 + (i, bits)  # ..., boff, bits
    n = np.int64(4)
    out = {
        s._apply_kernel: (st, (i, i, i, b, i, i), n, i),
        s._transpose_kernel: ((i, i), n),
        s._gather_pairs_kernel: ((i,) * 5, n),
        lex._ranges_kernel: ((m, m), (i, i), n),
        lex._merge_place_kernel: ((m, i, m, i), (i, i, i, i), n, n),
        lex._merge_scatter_kernel: ((m, i, m, i), (i, i, i, i), i, (m, i), n, n),
        lex._heads_kernel: ((m,), (i,), n, n),
        lex._group_sums_kernel: ((i, i, i), (i, i, i, i), n),
        lex._group_scatter_kernel: ((m,), (i, i, i, i), i, (m, i), n, n),
        lj._expand_count_kernel: ((m, m), (i, i), n),
        lj._expand_fill_kernel: ((m, i), (m, i), (i, i, i, i), (m, i), n, n, n),
        lj._extend_count_kernel: ((i, m, m), (m, m), (i, i), n),
        lj._extend_fill_kernel: ((i, m, m), (m, m), i, (i, i, m, m), n),
        s._probe_kernel: (st, (i, i), n),
        s._run_bits_kernel: ((i, i), n, n, n),
        s._merge_rank_kernel: ((i,) * 7, n, n, n, n),
        s._compact_pairs_kernel: ((i,) * 6, n, n),
        s._live_flags_kernel: ((i, i), n, n),
        s._directory_kernel: ((i, i, i), n, n, n) + (n,) * 12,
        s._compact_keys_kernel: (st, (i, i), n),
        s._compact_rows_of_kernel: (st, (i, i, i), n, n),
        s._copy_flagged_kernel: ((i, i, b, i, i, i, i, i), n, n, n, n) + (n,) * 12,
        s._merge_place_kernel: ((i,) * 8, n, n, n, True) + (n,) * 12,
        s._meta_kernel: ((i,),) + (n,) * 12,
        ph._phase_kernel: ((i, i, i, i, i, b, b, i, i, i, i, i), i, n, n, n, n),
        ph._check_phase_kernel: (st, st, (i, i, i, i, i, b, b, i, i, i, i, i, i), i, i, n, n,
                                 n, n),
        ph._unflip_kernel: ((i, b, i), i, n),
        ph._split_kernel: ((i,) * 8, n),
        ph._promote_kernel: ((i, i, i, i), n, n, n, n, n),
        ph._check_kernel: (st, st, (i, i, b, i), n, i),
        ph._total_kernel: ((i, i, i, i), n, n, n),
        ph._units_kernel: ((i,) * 5, n),
        s._count_rows_kernel: (st, (i, i), n),
        s._fill_rows_kernel: (st, (i,) * 4, n),
        s._first_counts_kernel: ((i, i), n),
        s._first_starts_kernel: ((i, i), n),
        s._scatter_firsts_kernel: ((i,) * 4, n),
        s._index_fill_kernel: (st, (i,) * 6, n),
        s._index_upsert_kernel: (st, (i,) * 5, n),
        s._bits_slots_kernel: ((i, i), n, n, n, n, n),
        s._bits_fill_kernel: (st, (i, i, i, bits, i, i), n),
        s._bits_meta_kernel: (i, n, n),
        s._bits_apply_kernel: ((i,) * 5 + (bits,) + (i,) * 4, n, n, n),
        d._pair_dot_kernel: ((i, i, i), st, st, n),
        d._path_weights_kernel: ((i, i, i, i), st, st, st, st, st, st, (i, m), (b, b), True,
                                 (k,), i, n, n),
        d._expand_counts_kernel: (st, (i, i), n),
        d._expand_split_kernel: (st, (i,) * 4, True, n),
        d._expand_emit_kernel: (st, (i,) * 6, True, n),
        d._seg_heads_kernel: ((i,) * 4, n),
        d._seg_put_kernel: ((i,) * 5, n),
        d._wedges_kernel: ((i, i, i), st, st, (b,), True, n),
        gv._pairs_kernel: ((i, i, i, k, i), st, st, (b,), n, n),
        gv._wedges_kernel: ((i, i, i, i), st, st, (b,), n),
        gv._add_counts_kernel: ((i, i, i), n),
        gv._get_counts_kernel: ((i, i, i), n),
        gl._listing_kernel: ((i,) * 8, st, st, (b,), n, n, n, n),
        d._wedges_total_kernel: ((i,) * 6, st, st, (b,), True, (i, i), n, n, n),
        d._emit_view_kernel: (st, (i,) * 7, (i, m), True, n, n),
        d._nonzero_flags_kernel: ((i, i), n),
        d._compact_kernel: ((i,) * 6, n),
        d._scatter_dense_kernel: ((i, i, b), (i, m), n),
        q._plan_kernel: ((i, i, u, u, i, i, i), (u, i), (u, i), True, True, st, st, n),
        q._walk_kernel: ((i,) * 8, (i, u, i, u, i), True, True, st, st, n, True),
        q._compact_query_kernel: ((i,) * 8, n),
        q._pair_sums_kernel: ((i, i), (u,), (u,), st, st, st, n, n, n),
        q._label_masks_kernel: ((i, i, i, u, u, np.zeros((2, 4), np.bool_)), (u,) * 4, n, n,
                                n),
        q._flag_change_kernel: ((i,) * 5, n),
        q._new_flags_kernel: ((i, i, i, u, b, b), n, n, n, n),
        off._lifespan_kernel: ((i,) * 3, (i,) * 3, i, n),
        w._triangle_kernel: ((i,) * 4, (i, i), (i,) * 5, i, n, n, i, i, n, True),
        ia._count_kernel: ((i,) * 4, (i, i), (i,) * 4, i, n, n),
        ia._claim_kernel: ((i,) * 3, (i, i), (i,), n, n),
        ia._repeat_kernel: ((i,) * 3, (i, i), (i,), n, n),
        ia._free_kernel: ((i,) * 3, (i, i), n),
        ia._edges_kernel: ((i,) * 3, (i,) * 3, i, n, n, n),
        ia._work_kernel: ((i, i), (i, i), i, n, n),
        ia._list_kernel: ((i,) * 4, (i, i), (i,) * 3, (i,) * 6, n, n, True),
        ws._claim_kernel: ((i,) * 4, (i, i), (i, i), n),
        ws._lead_kernel: ((i,) * 4, (i, i), (i, i), (i,) * 6, i, n, n),
        ws._settle_kernel: ((i,) * 4, (i, i), (i, i), (i,) * 6, (i,) * 4, n, n, n, n),
        ws._due_push_kernel: ((i,) * 3, (i,), n),
        ws._due_pop_kernel: ((i,) * 3, (i,), (i,) * 3, n),
        ws._revisit_kernel: ((i,) * 4, (i,), n, n),
        ws._rows_count_kernel: ((i,) * 4, (i, i), (i,), n),
        ws._rows_room_kernel: ((i,) * 4, (i, i), (i, i), n),
        ws._rows_move_kernel: ((i,) * 4, (i, i), (i, i), (i,) * 4, n, n),
        ws._rows_fill_kernel: ((i,) * 4, (i, i), (i, i, i), (i,), n),
        ws._rows_close_kernel: ((i,) * 4, (i, i), (i,), n),
        t._count_edges_kernel: ((i, i, i, i), n, True),
        t._abs_kernel: ((i, np.zeros(4)), n),
        t._edge_counts_kernel: ((i, i, i), n),
        t._edge_list_kernel: ((i,) * 6, n),
        t._relation_kernel: ((i,) * 5 + (np.zeros(4),) + (i,) * 3 + (np.zeros(4), i,
                                                                   np.zeros(4)), n),
        h._lookup_kernel: ((i,) * 4, n),
        h._insert_kernel: ((i,) * 4, n),
        bp._rows_kernel: ((i,) * 9, n, n),
        bp._groups_kernel: ((i, i, i, m, i, i), n, n, True, True),
        bp._scatter_kernel: ((i, i, m, m, m, i), n, True),
        sel._place_kernel: ((np.zeros((2, 4), np.bool_), m, i, i), n, n),
    }
    scans = launch._scan_kernels(launch.LaunchConfig().scan_tpb)
    for k, a in zip(scans, [((i, i), n, n), ((i,), n), ((i, i, i), n, n)]):
        out[k] = a
    return out


def main(argv: list[str]) -> int:
    outdir = Path(argv[2]) if len(argv) > 2 else None
    if outdir is not None:
        outdir.mkdir(parents=True, exist_ok=True)
    todo = cases(argv[1])
    for kern, args in todo.items():
        name = kern.py_func.__name__
        ptx, _ = cuda.compile_ptx(kern.py_func, tuple(typeof(a) for a in args), cc=(9, 0))
        if ".target sm_90" not in ptx:
            print(f"{name}: PTX is not for sm_90")
            return 1
        if outdir is not None:
            (outdir / f"{name}.ptx").write_text(ptx)
        print(f"{name:24s} {len(ptx):8d} chars of PTX")
    print(f"compiled {len(todo)} kernels for sm_90")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
