"""No compilation inside timed batches: after ``load()`` (or from the first ``apply()`` of an
engine that starts empty), with Numba's on-disk cache warm, a fresh process's batches add no
type signature to any CPU kernel (a new signature is a compilation or a load from the cache);
and the notice of a slow warm-up goes to stderr.

Oracle: Numba's own record of each dispatcher's compiled signatures, read in the process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import importlib, json, pkgutil
import numpy as np
from numba.core.registry import CPUDispatcher
import gpu_ivm, gpu_ivm.kernels
from gpu_ivm import GraphEngine, RelationEngine
from gpu_ivm.workloads import celebrity_churn, mixed_stream

SKIP = ("cuda", "spark", "__main__", "cli", "demo")
kernels = {}
for pkg in (gpu_ivm, gpu_ivm.kernels):
    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        if any(s in m.name for s in SKIP):
            continue
        for v in vars(importlib.import_module(m.name)).values():
            if isinstance(v, CPUDispatcher):
                kernels[v.py_func.__module__ + "." + v.py_func.__name__] = v

def signatures():
    return {k: len(v.signatures) for k, v in kernels.items()}

# first of all (nothing warmed yet in this process): engines that start empty and never call
# load() warm up in their first apply(), before its clock starts; the signatures added while
# a batch is applied (inside the timed part) are recorded
import gpu_ivm.graph_engine as ge, gpu_ivm.relation_engine as re_, gpu_ivm.warmup as wu
inside = set()
def spying(inner):
    def spy(self, *a, **k):
        if wu._running:  # the warm-up's own batches: compiling there is its job
            return inner(self, *a, **k)
        b = signatures()
        out = inner(self, *a, **k)
        after = signatures()
        inside.update(x for x in after if after[x] != b[x])
        return out
    return spy
saved = ge.GraphEngine._apply_batch, re_.RelationEngine._prepare
ge.GraphEngine._apply_batch = spying(saved[0])
re_.RelationEngine._prepare = spying(saved[1])
st = mixed_stream(12, batch_size=400, n_batches=3, seed=5)
g = GraphEngine()  # never loaded
g.apply({"src": st.base_src, "dst": st.base_dst,
         "sign": np.ones(st.base_src.shape[0], np.int64)})
for b in st.batches():
    g.apply(b)
rng = np.random.default_rng(2)
r = RelationEngine()  # never loaded
r.apply({"rel": np.array(["R", "S", "T"])[rng.integers(0, 3, 600)],
         "src": rng.integers(0, 50, 600), "dst": rng.integers(0, 50, 600),
         "mult": np.ones(600, np.int64)})
ge.GraphEngine._apply_batch, re_.RelationEngine._prepare = saved

# batches of 40 (pair by pair), 400 (grouped in the stores) and 3000 (against the copy of the
# graph, kernels/adjacency.py) updates on a graph of 4,096 ids
streams = [("uniform", mixed_stream(12, batch_size=40, n_batches=2, seed=1)),
           ("uniform", mixed_stream(12, batch_size=400, n_batches=2, seed=3)),
           ("uniform", mixed_stream(12, batch_size=3000, n_batches=2, seed=2)),
           ("churn", celebrity_churn(10, edge_factor=2, n_celebrities=12,
                                     celebrity_degree=1000, batch_size=60, n_batches=2))]
new = {}

def grown(g, st, read=False):  # the kernels that gained a signature while g applied the
    g.load((st.base_src, st.base_dst))  # stream's batches (``read``: and listed its triangles)
    before = signatures()
    for b in st.batches():
        g.apply(b)
    if read:
        list(g.triangles())
        g.triangles_of(st.base_src[:3])
    after = signatures()
    return sorted(k for k in after if after[k] != before[k])

for eps in ("auto", "1/2", "1"):
    for shape, st in streams:
        g = GraphEngine(epsilon=eps)
        grew = grown(g, st)
        if grew:
            new[f"{shape} eps={eps} -> {g.epsilon}"] = grew
# per-vertex and per-edge counts kept off the stores and the triangles listed off them
# (gpu_ivm/queries/graph_local.py): their warm-up
fams = ["vertex_counts", "edge_counts", "triangles"]
for eps in ("auto", "1/2"):
    for shape, st in (streams[0], streams[2]):
        grew = grown(GraphEngine(epsilon=eps, maintain=fams), st, read=True)
        if grew:
            new[f"{'+'.join(fams)} {shape} eps={eps}"] = grew
r = RelationEngine()
rng = np.random.default_rng(1)
rel = np.array(["R", "S", "T"])[rng.integers(0, 3, 3000)]
src, dst = rng.integers(0, 300, 3000), rng.integers(0, 300, 3000)
r.load(R={"src": src[:500], "dst": dst[:500]}, S={"src": src[500:900], "dst": dst[500:900]},
       T={"src": src[900:1400], "dst": dst[900:1400]})
before = signatures()
r.apply({"rel": rel, "src": src, "dst": dst, "mult": np.ones(3000, np.int64)})
r.apply({"rel": rel[:7], "src": src[:7], "dst": dst[:7], "mult": -np.ones(7, np.int64)})
after = signatures()
grew = sorted(k for k in after if after[k] != before[k])
if grew:
    new["relations"] = grew
if inside:
    new["inside the batches of engines that start empty"] = sorted(inside)
print(json.dumps({"kernels": len(kernels), "new": new}))
"""


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=900, check=True)


def test_first_batches_of_a_fresh_process_compile_nothing():
    _run(SCRIPT)  # fills Numba's on-disk cache if it is cold
    out = json.loads(_run(SCRIPT).stdout.strip().splitlines()[-1])
    assert out["kernels"] > 20  # the audit found the kernels
    assert out["new"] == {}


def test_slow_warm_up_prints_one_notice(tmp_path):
    """A cold cache (an empty NUMBA_CACHE_DIR) compiles: one notice, from the first warm-up.

    The warm-up's workload is cut to the static counter's kernels (a real compile of the
    package's kernels, about 10 s cold, where the whole workload takes minutes); that the whole
    workload leaves nothing to compile is test_first_batches_of_a_fresh_process_compile_nothing's
    check."""
    # GPU_IVM_CACHE_DIR, where the caller set it, would win over NUMBA_CACHE_DIR (a warm cache)
    code = ("import os; os.environ.pop('GPU_IVM_CACHE_DIR', None)\n"
            "os.environ['NUMBA_CACHE_DIR'] = " + repr(str(tmp_path)) + "\n"
            "import numpy as np\n"
            "import gpu_ivm.warmup as w\n"
            "from gpu_ivm.static import count_triangles_arrays\n"
            "w.NOTICE_AFTER_S = 0.5\n"
            "w._workload = lambda *a: count_triangles_arrays(np.array([0, 1, 2]), "
            "np.array([1, 2, 0]))\n"
            "first = w.warm_up('cpu', ['vertex_counts'])\n"
            "import time; time.sleep(0.2)\n"
            "print(first > 0, w.warm_up('cpu', ['vertex_counts']))\n")
    res = _run(code)
    assert res.stdout.split() == ["True", "0.0"]
    assert res.stderr.count("compiling kernels, first run only") == 1


def test_warm_cache_prints_no_notice():
    """With the cache warm nothing compiles, so no notice, however long the loading takes."""
    _run("import gpu_ivm.warmup as w; w.warm_up('cpu')")  # fills the cache if it is cold
    res = _run("import gpu_ivm.warmup as w\nw.NOTICE_AFTER_S = 0.0\nw.warm_up('cpu')\n"
               "import time; time.sleep(0.2)\nprint(w._cache_misses())")
    assert res.stdout.split() == ["0"]
    assert "compiling kernels" not in res.stderr
