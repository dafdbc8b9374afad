"""The kernel set of the ``cuda`` backend (Numba CUDA; runs in Numba's CUDA simulator too).

:func:`kernel_set` returns the namespace the engines use as ``backend.kernels``; its parts have
the functions, signatures and semantics of the CPU modules:

=========  ========================================  =========================================
part       module                                    CPU counterpart
=========  ========================================  =========================================
``store``  :mod:`gpu_ivm.kernels.cuda_store`         :mod:`gpu_ivm.kernels.store_kernels`
``delta``  :mod:`gpu_ivm.kernels.cuda_delta`         :mod:`gpu_ivm.kernels.delta_kernels`
``view``   :mod:`gpu_ivm.kernels.cuda_delta`         :mod:`gpu_ivm.kernels.view_kernels`
``query``  :mod:`gpu_ivm.kernels.cuda_query`         :mod:`gpu_ivm.kernels.query_kernels`
``hash``   :mod:`gpu_ivm.kernels.cuda_hash`          :mod:`gpu_ivm.kernels.hashmap`
``local``  :mod:`gpu_ivm.kernels.cuda_graph_local`   :mod:`gpu_ivm.kernels.graph_local`
           and :mod:`gpu_ivm.kernels.                and :mod:`gpu_ivm.kernels.
           cuda_graph_listing` (``common_above``,    graph_listing`, :mod:`gpu_ivm.
           ``batch_pair_triangles``)                 kernels.batch_triangles`
``prep``   :mod:`gpu_ivm.kernels.cuda_batch_prep`    ``prep_*`` of
                                                     :mod:`gpu_ivm.kernels.batch_prep`
``phase``  :mod:`gpu_ivm.kernels.cuda_phase`         :mod:`gpu_ivm.kernels.phase_kernels`
           (``phase_scan``, ``check_sets``,          and NumPy (called on the host)
           ``batch_total``, ``split_parts``)
``static`` :mod:`gpu_ivm.kernels.static_kernels`     itself (run on the host), except for
           and :mod:`gpu_ivm.kernels.cuda_static`    ``count_oriented_edges``,
                                                     ``list_oriented_edges`` and
                                                     ``relation_sum`` (device kernels; no
                                                     CPU twins)
=========  ========================================  =========================================

Importing this module imports ``numba.cuda``; :mod:`gpu_ivm.backend` imports it lazily, only
when the ``cuda`` backend is requested. Every kernel is a ``@cuda.jit`` function behind a
host-side launcher that checks its inputs, returns early on empty inputs and picks the launch
shape (:mod:`gpu_ivm.kernels.cuda_launch`); the per-element work is done by the same
``numba.njit`` inner loops as on the CPU (:mod:`gpu_ivm.kernels.lsm`, the per-update helpers of
:mod:`gpu_ivm.kernels.delta_kernels` and :mod:`gpu_ivm.kernels.query_kernels`).
"""

from __future__ import annotations

from types import ModuleType, SimpleNamespace

import numpy as np

from . import (
    cuda_batch_prep,
    cuda_delta,
    cuda_graph_listing,
    cuda_graph_local,
    cuda_hash,
    cuda_launch,
    cuda_phase,
    cuda_query,
    cuda_static,
    cuda_store,
    static_kernels,
)

STORE_FUNCTIONS = (
    "apply_updates", "probe_many", "probe_many_par", "probe_sorted", "merge_runs",
    "set_run_bits", "build_directory", "compact_keys", "compact_rows_of", "copy_flagged",
    "count_rows", "fill_rows",
    "collect_live", "first_key_counts", "sorted_unique_firsts", "index_fill", "index_upsert",
    "bits_fill", "bits_apply", "device_bundle", "patch_meta", "transposed_sorted",
    "sorted_by_key",
)
DELTA_FUNCTIONS = (
    "path_weights", "expand_counts", "expand_counts_split", "expand_emit",
    "segment_sum_sorted", "batch_wedges", "first_grouped_weights", "batch_wedges_total",
)
PHASE_SLOTS = ("N_HEAVY_KEYS", "D_OVER", "N_HEAVY_INS", "N_BAD", "N_THEN")  # phase_scan's counts
VIEW_FUNCTIONS = ("emit_view_deltas", "emit_view_deltas_par", "emit_view_keys",
                  "scatter_dense")
QUERY_FUNCTIONS = ("plan", "emit", "sums", "compact", "pair_sums", "label_masks",
                   "new_flags")
HASH_FUNCTIONS = ("lookup", "insert")
# The static part: every public name of the CPU module (run on the host), plus these kernels.
STATIC_FUNCTIONS = (
    "count_oriented_edges", "edge_triangles", "relation_sum", "list_oriented_edges",
)

CONFIG = cuda_launch.CONFIG
SIMULATOR = cuda_launch.SIMULATOR


def _part(module, names: tuple[str, ...], **extra) -> SimpleNamespace:
    return SimpleNamespace(**{n: getattr(module, n) for n in names}, **extra)


def _host_static() -> dict:
    """The public functions and constants of :mod:`static_kernels` (not its imports)."""
    return {k: v for k, v in vars(static_kernels).items()
            if not k.startswith("_") and not isinstance(v, ModuleType) and k != "annotations"}


def kernel_set(xp=None) -> SimpleNamespace:
    """The namespace ``store``, ``delta``, ``view``, ``static``, ``query``, ``hash`` of the cuda
    backend.

    ``delta`` also carries ``PAR_MIN``, ``view`` ``vget`` and ``query`` the ``CHOICE_*`` codes
    for code that reads them from the CPU modules. ``view`` has no ``build_view_rows`` (the
    CPU's row-wise view rebuild): views are rebuilt by ``gpu_ivm.views.product_entries``
    (expand, sort, reduce) from these kernels (see docs/gpu.md).
    ``static`` has the CPU module's public names (host functions, unused by the engines on this
    backend) plus the device static kernels of :mod:`~gpu_ivm.kernels.cuda_static`: the count
    of an oriented CSR (triangles, or directed 3-cycles with arc flags), its triangle listing
    and the three-relation sum. ``hash`` is the pair-id table's lookup and insert (the CPU
    layout of :mod:`~gpu_ivm.kernels.hashmap`). ``xp`` is the array module the
    engine's state lives in (CuPy on hardware, NumPy under the simulator); kernel outputs are
    allocated with it.
    """
    from . import query_kernels, view_kernels
    from .delta_kernels import PAR_MIN

    if xp is None:
        xp = np if SIMULATOR else __import__("cupy")
    cuda_launch.use_array_module(xp)
    return SimpleNamespace(
        xp=xp,
        store=_part(cuda_store, STORE_FUNCTIONS,
                    apply_updates_then=cuda_store.apply_updates_then,
                    META_RIDES=cuda_store.META_RIDES),
        hash=_part(cuda_hash, HASH_FUNCTIONS),
        prep=_part(cuda_batch_prep, ("rows", "groups", "scatter"),
                   counters=cuda_launch.counters),
        phase=_part(cuda_phase, ("phase_scan", "phase_launch", "check_sets", "batch_total",
                                      "batch_total_into", "split_parts", "delta_units"),
                    counter_scope=cuda_launch.counter_scope,
                    **{name: getattr(cuda_phase, name) for name in PHASE_SLOTS}),
        delta=_part(cuda_delta, DELTA_FUNCTIONS, PAR_MIN=PAR_MIN),
        local=_part(cuda_graph_local, ("local_delta", "vertex_delta", "add_counts",
                                       "get_counts"),
                    common_above=cuda_graph_listing.common_above,
                    batch_pair_triangles=cuda_graph_listing.batch_pair_triangles),
        view=_part(cuda_delta, VIEW_FUNCTIONS, vget=view_kernels.vget,
                   rows_to_promote=cuda_phase.rows_to_promote,
                   promote_then=cuda_phase.PromoteThen),
        static=_part(cuda_static, STATIC_FUNCTIONS, **_host_static()),
        query=_part(cuda_query, QUERY_FUNCTIONS,
                    **{c: getattr(query_kernels, c) for c in dir(query_kernels)
                       if c.startswith("CHOICE_")}),
    )
