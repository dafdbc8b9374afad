"""Peer systems: what a user would pick instead of gpu_ivm, as :class:`bench.system_base.System`
adapters.

* recount per batch with scipy (masked SpGEMM on the degree-ordered upper triangle) and with
  NetworKit (a dynamic ``nk.Graph`` + ``TriangleEdgeScore``);
* DuckDB maintaining the count with SQL delta queries, and DuckDB recounting with SQL;
* the factorized IVM form of gpu_ivm (``RelationEngine``, ε = {R: 0, S: 0, T: 1});
* gpu_ivm behind the Spark glue (``DriverEngine`` fed through ``mapInArrow`` ingestion);
* Pathway (a 3-way join maintained by its differential-dataflow engine) in its own virtualenv,
  driven through ``bench/pathway_driver.py`` in a subprocess.

Every optional dependency is imported lazily; :meth:`System.unavailable` says why a system
cannot run (the report shows the reason instead of dropping the row).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from bench.edgeset import EdgeSet, packed, sorted_unique
from bench.machine import REPO
from bench.system_base import RecountBase, System

PATHWAY_VENV = REPO / "bench" / ".venvs" / "pathway"
PATHWAY_REQUIREMENTS = REPO / "bench" / "requirements-pathway.txt"
PATHWAY_DRIVER = REPO / "bench" / "pathway_driver.py"


def _missing(module: str, pip: str) -> str | None:
    if importlib.util.find_spec(module) is None:
        return f"not installed (`pip install -r bench/requirements.txt` adds {pip})"
    return None


# ----------------------------------------------------------------------------- recounts
class ScipyRecount(RecountBase):
    """Recount with scipy: ``sum((U @ U).multiply(U))`` on the degree-ordered upper triangle."""

    name = "recount_scipy"
    label = "recount per batch (scipy SpGEMM)"

    @classmethod
    def unavailable(cls) -> str | None:
        return _missing("scipy", "scipy")

    def _recount(self) -> int:
        import scipy.sparse as sp

        a, b = self.edges.arrays()
        if a.shape[0] == 0:
            return 0
        verts = sorted_unique(np.concatenate([a, b]))
        n = verts.shape[0]
        ia = np.searchsorted(verts, a)
        ib = np.searchsorted(verts, b)
        deg = np.bincount(np.concatenate([ia, ib]), minlength=n)
        fwd = (deg[ia] < deg[ib]) | ((deg[ia] == deg[ib]) & (ia < ib))
        s = np.where(fwd, ia, ib)
        t = np.where(fwd, ib, ia)
        U = sp.csr_matrix((np.ones(s.shape[0], np.int64), (s, t)), shape=(n, n))
        return int((U @ U).multiply(U).sum())


class NetworkitRecount(RecountBase):
    """NetworKit: the edge set is a dynamic ``networkit.Graph`` (``removeEdge`` per deleted
    edge, ``addEdges`` for the inserts); the count is ``TriangleEdgeScore`` summed / 3."""

    name = "recount_networkit"
    label = "recount per batch (NetworKit)"

    @classmethod
    def unavailable(cls) -> str | None:
        return _missing("networkit", "networkit")

    def load(self, base_src, base_dst) -> float:
        import networkit as nk

        t = time.perf_counter()
        self.edges = EdgeSet(base_src, base_dst)
        a, b = self.edges.arrays()
        n = int(max(a.max(initial=0), b.max(initial=0))) + 1
        self.G = nk.Graph(n)
        if a.shape[0]:
            self.G.addEdges((a.astype(np.uint64), b.astype(np.uint64)))
        self._count = self._recount()
        return time.perf_counter() - t

    def _update(self, batch) -> None:
        src = np.asarray(batch["src"], np.int64)
        dst = np.asarray(batch["dst"], np.int64)
        sign = np.asarray(batch["sign"])
        self.edges.update(batch)  # also checks set semantics
        top = int(max(src.max(initial=-1), dst.max(initial=-1))) + 1
        if top > self.G.upperNodeIdBound():
            self.G.addNodes(top - self.G.upperNodeIdBound())
        for u, v in zip(src[sign < 0].tolist(), dst[sign < 0].tolist()):
            self.G.removeEdge(u, v)
        ins = sign > 0
        if ins.any():
            self.G.addEdges((src[ins].astype(np.uint64), dst[ins].astype(np.uint64)))
        self._count = None

    def _recount(self) -> int:
        import networkit as nk

        self.G.indexEdges(True)
        sc = nk.sparsification.TriangleEdgeScore(self.G)
        sc.run()
        return int(round(sum(sc.scores()))) // 3

    def close(self) -> None:
        self.G = None
        super().close()


# ----------------------------------------------------------------------------- DuckDB
_DUCK_RECOUNT = ("SELECT count(*) FROM U x JOIN U y ON x.b = y.a "
                 "JOIN U z ON z.a = x.a AND z.b = y.b")
# Q = sum U(a,b) U(b,c) U(a,c) over the oriented edge set U (a < b), so Q = triangles.
# Delta rule with U' = U + D: dQ = D.U.U + U'.D.U + U'.U'.D (D: the batch, weights +-1).
_DUCK_DELTA = """
WITH N AS (SELECT a, b, 1 AS w FROM U UNION ALL SELECT a, b, w FROM D)
SELECT
  (SELECT coalesce(sum(d.w), 0) FROM D d JOIN U x ON x.a = d.b
          JOIN U y ON y.a = d.a AND y.b = x.b)
+ (SELECT coalesce(sum(n.w * d.w), 0) FROM D d JOIN N n ON n.b = d.a
          JOIN U y ON y.a = n.a AND y.b = d.b)
+ (SELECT coalesce(sum(n1.w * n2.w * d.w), 0) FROM D d JOIN N n1 ON n1.a = d.a
          JOIN N n2 ON n2.a = n1.b AND n2.b = d.b)
"""


class _DuckBase(System):
    family = "peer"

    @classmethod
    def unavailable(cls) -> str | None:
        return _missing("duckdb", "duckdb")

    def __init__(self) -> None:
        self.con = None
        self._count: int | None = None

    def describe(self) -> dict:
        import duckdb

        return {"duckdb": duckdb.__version__,
                "threads": self.con.sql("SELECT current_setting('threads')").fetchall()[0][0]
                if self.con is not None else None}

    def _connect(self, base_src, base_dst) -> None:
        import duckdb
        import pyarrow as pa

        self.con = duckdb.connect()
        k = EdgeSet(base_src, base_dst).keys
        tbl = pa.table({"a": k >> 32, "b": k & 0xFFFFFFFF})
        self.con.register("base_in", tbl)
        self.con.sql("CREATE TABLE U AS SELECT a::BIGINT AS a, b::BIGINT AS b FROM base_in")
        self.con.unregister("base_in")

    def _stage(self, batch) -> None:
        import pyarrow as pa

        k = packed(batch["src"], batch["dst"])
        tbl = pa.table({"a": k >> 32, "b": k & 0xFFFFFFFF,
                        "w": np.asarray(batch["sign"], np.int64)})
        self.con.register("batch_in", tbl)
        self.con.sql("CREATE OR REPLACE TEMP TABLE D AS "
                     "SELECT a::BIGINT AS a, b::BIGINT AS b, w::BIGINT AS w FROM batch_in")
        self.con.unregister("batch_in")

    def _apply_sql(self) -> None:
        self.con.sql("DELETE FROM U USING D WHERE D.w < 0 AND U.a = D.a AND U.b = D.b")
        self.con.sql("INSERT INTO U SELECT a, b FROM D WHERE w > 0")

    def interrupt(self) -> None:
        if self.con is not None:
            self.con.interrupt()

    def count(self) -> int:
        if self._count is None:
            self._count = int(self.con.sql(_DUCK_RECOUNT).fetchall()[0][0])
        return self._count

    def close(self) -> None:
        if self.con is not None:
            self.con.close()
        self.con = None


class DuckDBDelta(_DuckBase):
    """DuckDB maintaining the count with the delta rules of the 3-way self-join (deletes as
    weight −1), then applying the batch to the table ``U`` of oriented edges (a < b)."""

    name = "duckdb_delta"
    label = "DuckDB SQL delta queries"

    def load(self, base_src, base_dst) -> float:
        t = time.perf_counter()
        self._connect(base_src, base_dst)
        self._count = int(self.con.sql(_DUCK_RECOUNT).fetchall()[0][0])
        return time.perf_counter() - t

    def apply(self, batch) -> float:
        t = time.perf_counter()
        self._stage(batch)
        dq = int(self.con.sql(_DUCK_DELTA).fetchall()[0][0])
        self._apply_sql()
        self._count += dq
        return time.perf_counter() - t


class DuckDBRecount(_DuckBase):
    """DuckDB applying the batch to ``U`` and recounting with the SQL triangle query."""

    name = "duckdb_recount"
    label = "recount per batch (DuckDB SQL)"
    family = "baseline"
    sampled = True

    def load(self, base_src, base_dst) -> float:
        t = time.perf_counter()
        self._connect(base_src, base_dst)
        self._count = None
        self.count()
        return time.perf_counter() - t

    def skip(self, batch) -> None:
        self._stage(batch)
        self._apply_sql()
        self._count = None

    def apply(self, batch) -> float:
        t = time.perf_counter()
        self.skip(batch)
        self.count()
        return time.perf_counter() - t


# ----------------------------------------------------------------------------- factorized
class FactorizedSystem(System):
    """``RelationEngine(epsilon={"R": 0, "S": 0, "T": 1})`` on three copies R = S = T of the
    directed edge relation (both directions of each undirected edge); count = Q / 6."""

    name = "gpu_ivm_factorized"
    label = "gpu_ivm factorized IVM (ε R,S=0, T=1)"
    family = "gpu_ivm"
    EPS = {"R": 0, "S": 0, "T": 1}

    def __init__(self) -> None:
        self.engine = None
        self._last: dict = {}

    def describe(self) -> dict:
        return {"epsilon": dict(self.EPS)}

    def load(self, base_src, base_dst) -> float:
        from gpu_ivm import RelationEngine

        s = np.asarray(base_src, np.int64)
        d = np.asarray(base_dst, np.int64)
        keep = s != d
        s, d = s[keep], d[keep]
        both = {"src": np.concatenate([s, d]), "dst": np.concatenate([d, s])}
        self.engine = RelationEngine(epsilon=self.EPS)
        t = time.perf_counter()
        self.engine.load(R=both, S=both, T=both)
        return time.perf_counter() - t

    @staticmethod
    def _rows(batch) -> dict:
        s = np.asarray(batch["src"], np.int64)
        d = np.asarray(batch["dst"], np.int64)
        w = np.asarray(batch["sign"], np.int64)
        m = s.shape[0]
        src = np.tile(np.concatenate([s, d]), 3)
        dst = np.tile(np.concatenate([d, s]), 3)
        rel = np.repeat(np.arange(3, dtype=np.int64), 2 * m)
        return {"rel": rel, "src": src, "dst": dst, "mult": np.tile(np.concatenate([w, w]), 3)}

    def apply(self, batch) -> float:
        t = time.perf_counter()
        rep = self.engine.apply(self._rows(batch))
        sec = time.perf_counter() - t
        self._last = {"path": rep.path, "engine_s": rep.seconds}
        return sec

    def info(self) -> dict:
        return dict(self._last)

    def count(self) -> int:
        q = int(self.engine.count())
        if q % 6:
            raise ValueError(f"factorized: Q = {q} is not a multiple of 6")
        return q // 6

    def close(self) -> None:
        self.engine = None


# ----------------------------------------------------------------------------- Spark
_SPARK = {"session": None, "startup_s": None}


def spark_session():
    """One local[2] session for the whole benchmark run (start-up reported apart)."""
    if _SPARK["session"] is None:
        from gpu_ivm.spark_glue.session import local_session

        t = time.perf_counter()
        _SPARK["session"] = local_session("local[2]", app_name="gpu_ivm bench",
                                          max_records_per_batch=100_000)
        _SPARK["startup_s"] = time.perf_counter() - t
    return _SPARK["session"]


def stop_spark() -> None:
    if _SPARK["session"] is not None:
        _SPARK["session"].stop()
        _SPARK["session"] = None


class SparkDriverSystem(System):
    """gpu_ivm behind the Spark glue, the path of ``gpu-ivm spark-replay`` without shards: each
    batch becomes a Spark DataFrame (``create_frame``), is validated on the executors
    (``ingest``: ``mapInArrow``), collected to the driver as Arrow (``collect_arrow``) and
    applied by a ``DriverEngine`` (in memory, no state folder). ``info`` splits each batch's
    time into the engine's part and the Arrow hand-off (everything else)."""

    name = "spark_driver"
    label = "gpu_ivm ε=½ via Spark (spark-replay path)"
    family = "gpu_ivm"

    @classmethod
    def unavailable(cls) -> str | None:
        if importlib.util.find_spec("pyspark") is None:
            return "pyspark not installed (`pip install -e '.[spark]'`)"
        return None

    def __init__(self) -> None:
        self.eng = None
        self._i = 0
        self._last: dict = {}

    def describe(self) -> dict:
        import pyspark

        return {"pyspark": pyspark.__version__, "spark_startup_s": _SPARK["startup_s"]}

    def load(self, base_src, base_dst) -> float:
        import pyarrow as pa
        from gpu_ivm.spark_glue.ingest import collect_arrow, create_frame, ingest
        from gpu_ivm.spark_glue.sink import DriverEngine

        from gpu_ivm.graph_engine import GraphEngine

        spark = spark_session()
        # the first mapInArrow starts Spark's Python workers (about 4 s): not the engine's cost
        warm = pa.table({"src": np.array([1], np.int64), "dst": np.array([2], np.int64),
                         "sign": np.array([1], np.int64)})
        collect_arrow(ingest(create_frame(spark, warm)))
        t = time.perf_counter()
        self.eng = DriverEngine(None, base=(np.asarray(base_src), np.asarray(base_dst)),
                                factory=lambda: GraphEngine(epsilon="1/2"))
        _ = self.eng.engine
        self._i = 0
        return time.perf_counter() - t

    def apply(self, batch) -> float:
        import pyarrow as pa
        from gpu_ivm.spark_glue.ingest import collect_arrow, create_frame, ingest

        spark = spark_session()
        t = time.perf_counter()
        df = create_frame(spark, pa.table({k: np.asarray(batch[k], np.int64)
                                           for k in ("src", "dst", "sign")}))
        table = collect_arrow(ingest(df))
        t_engine = time.perf_counter()
        rep = self.eng.apply(table, batch_id=self._i)
        end = time.perf_counter()
        self._i += 1
        self._last = {"path": rep.path, "engine_s": end - t_engine,
                      "handoff_s": t_engine - t}
        return end - t

    def info(self) -> dict:
        return dict(self._last)

    def count(self) -> int:
        return int(self.eng.count())

    def close(self) -> None:
        self.eng = None


# ----------------------------------------------------------------------------- Pathway
def pathway_python() -> Path:
    return PATHWAY_VENV / "bin" / "python"


def ensure_pathway_venv(log=print, timeout: float = 900.0) -> str | None:
    """Create ``bench/.venvs/pathway`` with pathway installed (once); return None when it is
    usable, else the reason it is not."""
    py = pathway_python()
    marker = PATHWAY_VENV / ".installed"
    if py.exists() and marker.exists():
        return None
    base = getattr(sys, "_base_executable", None) or sys.executable
    PATHWAY_VENV.parent.mkdir(parents=True, exist_ok=True)
    ignore = PATHWAY_VENV.parent / ".gitignore"  # keep the venvs out of git
    if not ignore.exists():
        ignore.write_text("*\n")
    log(f"[pathway] creating {PATHWAY_VENV.relative_to(REPO)} (pip install pathway; about "
        "1.6 GB, a minute or two, once)")
    try:
        if not py.exists():
            subprocess.run([base, "-m", "venv", str(PATHWAY_VENV)], check=True,
                           capture_output=True, timeout=120)
        r = subprocess.run([str(py), "-m", "pip", "install", "--quiet", "-r",
                            str(PATHWAY_REQUIREMENTS)], capture_output=True, text=True,
                           timeout=timeout)
        if r.returncode != 0:
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["?"]
            return f"pip install pathway failed: {tail[0][:200]}"
        r = subprocess.run([str(py), "-c", "import pathway"], capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 0:
            return f"import pathway failed: {r.stderr.strip().splitlines()[-1:]}"
    except (OSError, subprocess.SubprocessError) as e:
        return f"could not create the Pathway venv: {e}"
    marker.write_text("ok\n")
    return None


def _rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


class PathwaySystem(System):
    """Pathway 3-way join ``U ⋈ U ⋈ U`` (oriented edges a < b) + ``count``, maintained by its
    engine. Runs in its own venv (pathway pins pyarrow < 26) as a subprocess
    (``bench/pathway_driver.py``) that reads the base graph and the batches from Parquet files
    written here and prints one JSON line per batch (its time and the count). The whole replay
    is one call (:meth:`run_stream`); the subprocess is killed at the time cap or when its
    resident memory passes the memory cap, and the record says which."""

    name = "pathway"
    label = "Pathway (3-way join, own venv)"
    family = "peer"
    external = True

    @classmethod
    def unavailable(cls) -> str | None:
        return None  # the venv is created on first use; failures are reported by run_stream

    def load(self, base_src, base_dst) -> float:  # pragma: no cover - external system
        raise NotImplementedError("PathwaySystem runs through run_stream")

    def apply(self, batch) -> float:  # pragma: no cover - external system
        raise NotImplementedError("PathwaySystem runs through run_stream")

    def count(self) -> int:  # pragma: no cover - external system
        raise NotImplementedError("PathwaySystem runs through run_stream")

    def run_stream(self, base_src, base_dst, batches: list[dict], cap_s: float,
                   mem_cap_bytes: int, log=print) -> dict:
        """Run the whole replay; return ``status``, ``load_s``, ``batch_seconds``,
        ``counts`` (after each finished batch), ``peak_rss_bytes`` and ``detail``."""
        reason = ensure_pathway_venv(log)
        if reason:
            return {"status": "unavailable", "detail": reason}
        import pyarrow as pa
        import pyarrow.parquet as pq

        with tempfile.TemporaryDirectory(prefix="bench-pathway-") as tmp:
            k = EdgeSet(base_src, base_dst).keys
            pq.write_table(pa.table({"a": k >> 32, "b": k & 0xFFFFFFFF}),
                           os.path.join(tmp, "base.parquet"))
            parts = []
            for i, b in enumerate(batches):
                kb = packed(b["src"], b["dst"])
                parts.append(pa.table({"batch": np.full(kb.shape[0], i, np.int64),
                                       "a": kb >> 32, "b": kb & 0xFFFFFFFF,
                                       "w": np.asarray(b["sign"], np.int64)}))
            pq.write_table(pa.concat_tables(parts) if parts else pa.table({}),
                           os.path.join(tmp, "batches.parquet"))
            cmd = [str(pathway_python()), str(PATHWAY_DRIVER), tmp, str(len(batches))]
            env = dict(os.environ, PATHWAY_THREADS="1", PYTHONUNBUFFERED="1")
            out_path = os.path.join(tmp, "out.jsonl")
            err_path = os.path.join(tmp, "err.txt")
            with open(out_path, "w") as fo, open(err_path, "w") as fe:
                p = subprocess.Popen(cmd, stdout=fo, stderr=fe, env=env)
                peak = 0
                status = "ok"
                t0 = time.perf_counter()
                while p.poll() is None:
                    rss = _rss_kib(p.pid)
                    if rss:
                        peak = max(peak, rss * 1024)
                    if peak > mem_cap_bytes:
                        p.kill()
                        status = "out of memory"
                        break
                    if time.perf_counter() - t0 > cap_s:
                        p.kill()
                        status = "timed out"
                        break
                    time.sleep(0.1)
                p.wait()
                wall = time.perf_counter() - t0
            lines = [json.loads(x) for x in Path(out_path).read_text().splitlines()
                     if x.startswith("{")]
            err = Path(err_path).read_text().strip().splitlines()
        if status == "ok" and p.returncode != 0:
            status = "failed"
        info = next((x for x in lines if x.get("kind") == "base"), {})
        per = [x for x in lines if x.get("kind") == "batch"]
        detail = ""
        if status == "timed out":
            detail = f"timed out after {cap_s:.0f} s ({len(per)} of {len(batches)} batches)"
        elif status == "out of memory":
            detail = (f"killed at {peak / 2**30:.1f} GiB resident (cap "
                      f"{mem_cap_bytes / 2**30:.1f} GiB) after {wall:.0f} s, "
                      f"{len(per)} of {len(batches)} batches")
        elif status == "failed":
            detail = f"exit {p.returncode}: {(err[-1] if err else '?')[:200]}"
        return {"status": status, "detail": detail, "load_s": info.get("seconds"),
                "base_count": info.get("count"), "pathway": info.get("version"),
                "batch_seconds": [x["seconds"] for x in per],
                "counts": {x["batch"]: x["count"] for x in per},
                "peak_rss_bytes": peak, "wall_s": wall}


class Watchdog:
    """Calls ``system.interrupt()`` (if it has one) when ``cap_s`` seconds have passed."""

    def __init__(self, system: System, cap_s: float):
        self.fired = False
        self._sys = system
        self._timer = threading.Timer(cap_s, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.fired = True
        fn = getattr(self._sys, "interrupt", None)
        if fn is not None:
            try:
                fn()
            except Exception:  # noqa: BLE001 - best effort
                pass

    def __enter__(self) -> Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()
