"""The query engine (``gpu_ivm.cq``) under insert/delete batches: flatness and DuckDB.

    python -m bench.cq_bench [--sizes 100000 1600000] [--peer-size 100000]
                             [--batch-size 1000] [--batches 30]
    python -m bench.cq_bench --cyclic N [--skew] [--binary-build] [--strategy auto]

- **flatness**: the CQAP_0 query ``Q(B,C | A) = R(A,B), S(A,C)`` over random relations of N
  tuples each (values in [0, N/10)), at every N of ``--sizes``: mean seconds per batch of
  ``--batch-size`` rows (half deletes of held tuples, half inserts) and the request latency
  per answer (1,000 random A values per request batch). The thesis bound is O(1) per update
  and per answer, so the per-batch time should not grow with N.
- **vs DuckDB**: the 2-path ``Q(A,C | ) = R(A,B), S(B,C)``, a star
  ``Q(A | ) = R(A,B), S(A,C), T(A,D)`` and the 4-cycle
  ``Q( | ) = R(A,B), S(B,C), T(C,D), U(D,A)`` at ``--peer-size`` tuples per relation
  (values in [0, N/10)): the engine against DuckDB keeping the same count by delta SQL (per
  relation of the batch, ``SUM(Δ.m · Π other.m)`` over the join of the delta with the other
  relations' tables, then the delta appended to its table), the count compared after every
  batch (two independent computations); the first batch is applied untimed by both.

- **cyclic queries** (``--cyclic N``, alone): the triangle with an input and the triangle
  count over random R, S, T of N tuples: load and batch seconds and the entries the views
  hold (the indicator projections keep the triangle's views at the triangles instead of
  every 2-path); the count checked against the static three-relation triangle sum. The
  triangle's view is built by Generic Join (:mod:`gpu_ivm.cq.wcoj`): the candidates it
  visited and the largest binary-join intermediate of the load are printed. ``--skew``:
  R(A,B) and S(B,C) take B from ``SkewedStream.HUBS`` hub values in ``HUB_SHARE`` of their
  tuples (R ⋈ S through a hub: its degree squared), T stays uniform. ``--binary-build``:
  the views built by binary joins as before Generic Join (the same engine otherwise).
  ``--strategy auto``: each query on the planner's choice (``gpu_ivm.cq.engine``: the
  triangle queries with at most one input, here the count and ``Q(B,C | A)``, on the
  triangle engine, IVM^ε) instead of the view trees (the default, ``view-trees``). The
  triangle engine has no view-tree counters, so its "entries" column reads 0.

- **the ε knob**: ``Q(C | A) = R(A,B), S(B,C)`` (hierarchical, CQAP_1: δ = 1) over relations
  whose B values are Zipf-distributed (a few B values of degree far above √N), at each ε of
  ``--epsilons`` (``gpu_ivm.cq.tradeoff`` below 1): mean seconds per batch and seconds per
  request of 1,000 A values. The thesis predicts update time O(N^{ε}) and delay O(N^{1−ε}):
  updates slower and requests faster as ε grows.

Prints one line per measurement; :func:`measure_flat`, :func:`measure_peer` and
:func:`measure_eps` return the records ``python -m bench``'s ``cq`` scenario writes.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

FLAT_QUERY = "Q(B,C | A) = R(A,B), S(A,C)"
PEER_QUERIES = {
    "2-path": "Q(A,C | ) = R(A,B), S(B,C)",
    "star": "Q(A | ) = R(A,B), S(A,C), T(A,D)",
    "4-cycle": "Q( | ) = R(A,B), S(B,C), T(C,D), U(D,A)",
}


class Stream:
    """Random binary relations and batches of deletes (of held tuples) and inserts."""

    def __init__(self, names, n: int, domain: int, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.domain = domain
        self.held = {r: self.rng.integers(0, domain, (n, 2)) for r in names}

    def _new(self, name: str, k: int) -> np.ndarray:
        """k new random tuples of relation ``name``."""
        return self.rng.integers(0, self.domain, (k, 2))

    def tables(self) -> dict:
        return {r: {"x": a[:, 0], "y": a[:, 1]} for r, a in self.held.items()}

    def batch(self, size: int) -> dict:
        """``{relation: (rows (k, 2), mult)}``: size // 2 deletes and the rest inserts, spread
        over the relations; the held tuples change accordingly."""
        names = list(self.held)
        out = {}
        for j, r in enumerate(names):
            k = size // len(names) + (1 if j < size % len(names) else 0)
            held = self.held[r]
            gone = self.rng.choice(held.shape[0], k // 2, replace=False)
            new = self._new(r, k - k // 2)
            keep = np.ones(held.shape[0], bool)
            keep[gone] = False
            rows = np.concatenate([held[gone], new])
            mult = np.concatenate([-np.ones(k // 2, np.int64), np.ones(k - k // 2, np.int64)])
            self.held[r] = np.concatenate([held[keep], new])
            out[r] = (rows, mult)
        return out


def _as_tables(batch: dict) -> dict:
    return {r: {"x": rows[:, 0], "y": rows[:, 1], "mult": m} for r, (rows, m) in batch.items()}


def _timed_batches(eng, batches: list) -> list[float]:
    """Seconds of ``eng.apply`` for each batch, in order."""
    secs = []
    for b in batches:
        t = time.perf_counter()
        eng.apply(b)
        secs.append(time.perf_counter() - t)
    return secs


def measure_flat(sizes, batch_size: int, n_batches: int, seed: int = 0) -> list[dict]:
    """One record per N: mean and median seconds per batch, request seconds per answer."""
    from gpu_ivm.cq import Engine

    recs = []
    for n in sizes:
        st = Stream("RS", n, max(n // 10, 1), seed)
        eng = Engine(FLAT_QUERY)
        t = time.perf_counter()
        eng.load(**st.tables())
        load_s = time.perf_counter() - t
        eng.apply(_as_tables(st.batch(batch_size)))  # untimed: kernels compiled, indexes built
        # made before the timing: the generator rewrites the held tuples (O(N) per batch),
        # which would leave the timed batch a cold cache
        batches = [_as_tables(st.batch(batch_size)) for _ in range(n_batches)]
        secs = _timed_batches(eng, batches)
        req = {"A": st.rng.integers(0, st.domain, 1000)}
        eng.request(req)
        t = time.perf_counter()
        answers = eng.request(req).num_rows
        req_s = time.perf_counter() - t
        want = _flat_count(st.held, st.domain)
        recs.append({"n": n, "batch_size": batch_size, "batches": n_batches, "load_s": load_s,
                     "mean_s": float(np.mean(secs)), "median_s": float(np.median(secs)),
                     "batch_s": secs, "request_s": req_s, "answers": answers,
                     "count": eng.count(), "count_ok": eng.count() == want})
    return recs


def _flat_count(held: dict, domain: int) -> int:
    """``FLAT_QUERY``'s count by degrees: Σ_A |R(A,·)| · |S(A,·)| (an oracle without DuckDB)."""
    r = np.bincount(held["R"][:, 0], minlength=domain).astype(np.int64)
    s = np.bincount(held["S"][:, 0], minlength=domain).astype(np.int64)
    return int(r @ s)


# ----------------------------------------------------------------------------- DuckDB peer
def _sql_join(query, skip: int | None, delta: str | None) -> tuple[str, str]:
    """FROM and WHERE of the query's join, atom ``skip`` read from table ``delta``."""
    from gpu_ivm.cq import parse_query

    q = parse_query(query)
    tables, where, first = [], [], {}
    for i, atom in enumerate(q.atoms):
        alias = f"a{i}"
        tables.append(f"{delta if i == skip else atom.relation.lower()} AS {alias}")
        for c, v in zip(("x", "y"), atom.variables):
            if v in first:
                where.append(f"{alias}.{c} = {first[v]}")
            else:
                first[v] = f"{alias}.{c}"
    return ", ".join(tables), " AND ".join(where) or "TRUE"


def _product(query) -> str:
    from gpu_ivm.cq import parse_query

    return " * ".join(f"a{i}.m" for i in range(len(parse_query(query).atoms)))


class DuckDeltaCount:
    """DuckDB keeping the query's count by delta SQL (relations without self-joins)."""

    def __init__(self, query: str, held: dict) -> None:
        import duckdb

        self.query = query
        self.con = duckdb.connect()
        self.con.execute("SET threads TO 2").fetchall()
        for r, a in held.items():
            self.con.register("load_df", {"x": a[:, 0], "y": a[:, 1]})
            self.con.execute(f"CREATE TABLE {r.lower()} AS SELECT x, y, 1::BIGINT AS m "
                             "FROM load_df").fetchall()
            self.con.unregister("load_df")
        frm, where = _sql_join(query, None, None)
        self.count = int(self.con.execute(f"SELECT COALESCE(SUM({_product(query)}), 0)"
                                          f"::HUGEINT FROM {frm} WHERE {where}").fetchall()[0][0])

    def apply(self, batch: dict) -> None:
        from gpu_ivm.cq import parse_query

        atoms = parse_query(self.query).atoms
        for r, (rows, mult) in batch.items():
            self.con.register("delta", {"x": rows[:, 0], "y": rows[:, 1], "m": mult})
            for i, atom in enumerate(atoms):
                if atom.relation == r:
                    frm, where = _sql_join(self.query, i, "delta")
                    got = self.con.execute(f"SELECT COALESCE(SUM({_product(self.query)}), 0)"
                                           f"::HUGEINT FROM {frm} WHERE {where}").fetchall()[0][0]
                    self.count += int(got)
            self.con.execute(f"INSERT INTO {r.lower()} SELECT x, y, m FROM delta").fetchall()
            self.con.unregister("delta")


def measure_peer(name: str, n: int, batch_size: int, n_batches: int, seed: int = 0) -> dict:
    """gpu_ivm.cq against DuckDB's delta SQL on one query: seconds per batch, counts checked
    after every batch."""
    from gpu_ivm.cq import Engine, parse_query

    query = PEER_QUERIES[name]
    st = Stream(sorted(parse_query(query).schemas), n, max(n // 10, 1), seed)
    eng = Engine(query)
    t = time.perf_counter()
    eng.load(**st.tables())
    load_s = time.perf_counter() - t
    duck = DuckDeltaCount(query, st.held)
    ok = eng.count() == duck.count
    first = st.batch(batch_size)  # untimed for both: indexes built, kernels and plans warm
    eng.apply(_as_tables(first))
    duck.apply(first)
    ok &= eng.count() == duck.count
    ours, theirs = [], []
    for b in [st.batch(batch_size) for _ in range(n_batches)]:  # made before the timing
        t = time.perf_counter()
        eng.apply(_as_tables(b))
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        duck.apply(b)
        theirs.append(time.perf_counter() - t)
        ok &= eng.count() == duck.count
    return {"query_name": name, "query": query, "n": n, "batch_size": batch_size,
            "batches": n_batches, "load_s": load_s, "gpu_ivm_s": ours, "duckdb_s": theirs,
            "gpu_ivm_mean_s": float(np.mean(ours)), "duckdb_mean_s": float(np.mean(theirs)),
            "count": eng.count(), "count_ok": bool(ok)}


EPS_QUERY = "Q(C | A) = R(A,B), S(B,C)"


class SkewedStream(Stream):
    """R(A,B) and S(B,C) whose B is one of ``HUBS`` hub values in ``HUB_SHARE`` of the tuples
    (degree about n·HUB_SHARE/HUBS, far above √N) and uniform otherwise; inserts follow the
    same mix."""

    HUBS = 10
    HUB_SHARE = 0.1

    def __init__(self, n: int, domain: int, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.domain = domain
        self.held = {"R": self._new("R", n), "S": self._new("S", n)}

    def _new(self, name: str, k: int) -> np.ndarray:
        b = self.rng.integers(0, self.domain, k)
        hub = self.rng.random(k) < self.HUB_SHARE
        b[hub] = self.rng.integers(0, self.HUBS, int(hub.sum()))
        other = self.rng.integers(0, self.domain, k)
        return np.stack([other, b] if name == "R" else [b, other], axis=1)


FIRST = 10  # the limit of the ε table's limited request batch


def _first_rows(table, limit: int) -> list[dict]:
    """The first ``limit`` rows per request of a request's answers (sorted by request)."""
    rows, seen = [], {}
    for x in table.to_pylist():
        seen[x["request"]] = seen.get(x["request"], 0) + 1
        if seen[x["request"]] <= limit:
            rows.append(x)
    return rows


def measure_eps(n: int, batch_size: int, n_batches: int, epsilons, seed: int = 0) -> list[dict]:
    """One record per ε: load seconds, mean seconds per batch, seconds per request batch of
    1,000 A values and its answers, and per request batch with ``limit=FIRST`` (the first
    answers: what the thesis's delay bounds); every ε's answers are compared with ε = 1's,
    the limited ones with the first rows of the whole answer."""
    from gpu_ivm.cq.factory import engine

    recs = []
    batches = None
    for eps in epsilons:
        st = SkewedStream(n, max(n // 10, 1), seed)
        batches = batches or [st.batch(batch_size) for _ in range(n_batches + 1)]
        st = SkewedStream(n, max(n // 10, 1), seed)
        eng = engine(EPS_QUERY, epsilon=eps)
        t = time.perf_counter()
        eng.load(**st.tables())
        load_s = time.perf_counter() - t
        eng.apply(_as_tables(batches[0]))  # untimed
        secs = _timed_batches(eng, [_as_tables(b) for b in batches[1:]])
        req = {"A": np.random.default_rng(seed + 1).integers(0, st.domain, 1000)}
        eng.request(req)
        t = time.perf_counter()
        ans = eng.request(req)
        req_s = time.perf_counter() - t
        eng.request(req, limit=FIRST)
        t = time.perf_counter()
        first = eng.request(req, limit=FIRST)
        first_s = time.perf_counter() - t
        first_ok = first.to_pylist() == _first_rows(ans, FIRST)
        heavy = getattr(eng, "heavy_keys", np.zeros(0))
        recs.append({"epsilon": str(eps), "n": n, "batch_size": batch_size,
                     "batches": n_batches, "load_s": load_s, "mean_s": float(np.mean(secs)),
                     "batch_s": secs, "request_s": req_s, "requests": 1000,
                     "answers": ans.num_rows, "heavy_values": int(heavy.shape[0]),
                     "first_s": first_s, "first_limit": FIRST, "first_answers": first.num_rows,
                     "first_ok": first_ok, "count": eng.count(), "answers_sha": _digest(ans)})
    ref = next((r for r in recs if r["epsilon"] == "1"), recs[-1])
    for r in recs:
        r["count_ok"] = (r["count"] == ref["count"] and r["answers_sha"] == ref["answers_sha"]
                         and r["first_ok"])
    return recs


CYCLIC_QUERIES = {
    "triangle with an input": "Q(B,C | A) = R(A,B), S(B,C), T(C,A)",
    "triangle count": "Q( | ) = R(A,B), S(B,C), T(C,A)",
}


class SkewedCycleStream(SkewedStream):
    """R(A,B) and S(B,C) as in :class:`SkewedStream` (B a hub value in ``HUB_SHARE`` of
    the tuples), T(C,A) uniform."""

    def __init__(self, n: int, domain: int, seed: int) -> None:
        super().__init__(n, domain, seed)
        self.held["T"] = self._new("T", n)

    def _new(self, name: str, k: int) -> np.ndarray:
        if name == "T":
            return self.rng.integers(0, self.domain, (k, 2))
        return super()._new(name, k)


def measure_cyclic(n: int, batch_size: int, n_batches: int, seed: int = 0, *,
                   skew: bool = False, binary_build: bool = False,
                   strategy: str = "view_trees") -> list[dict]:
    """Non-hierarchical queries (the triangle with and without an input) over random R, S,
    T of ``n`` tuples each (values in [0, n/10); ``skew``: :class:`SkewedCycleStream`): load
    seconds, mean seconds per batch (half deletes, half inserts, over R, S and T), the
    entries held in all views and leaves, the load's join work (Generic Join's candidates,
    the largest binary-join intermediate; ``binary_build``: no Generic Join), and the count
    checked after the last batch against ``gpu_ivm.static.relation_triangle_sum`` (other
    code)."""
    from gpu_ivm.cq import Engine, engine
    from gpu_ivm.static import relation_triangle_sum

    recs = []
    for name, query in CYCLIC_QUERIES.items():
        domain = max(n // 10, 1)
        st = SkewedCycleStream(n, domain, seed) if skew else Stream("RST", n, domain, seed)
        eng = Engine(query) if strategy == "view_trees" else engine(query, strategy=strategy)
        if binary_build:
            eng._wcoj = set()
        t = time.perf_counter()
        eng.load(**st.tables())
        load_s = time.perf_counter() - t
        build = dict(getattr(eng, "build_stats", {}))
        batches = [_as_tables(st.batch(batch_size)) for _ in range(n_batches)]
        secs = _timed_batches(eng, batches)
        rels = []
        for r in "RST":
            keys, mult = np.unique(st.held[r], axis=0, return_counts=True)
            rels.append((keys[:, 0], keys[:, 1], mult.astype(np.int64)))
        want = relation_triangle_sum(*rels, st.domain)
        held = {id(v): v for v in getattr(eng, "views", {}).values()}.values()
        recs.append({"query_name": name, "query": query, "n": n, "batch_size": batch_size,
                     "batches": n_batches, "load_s": load_s, "mean_s": float(np.mean(secs)),
                     "batch_s": secs, "entries": int(sum(len(v.zrel()) for v in held)),
                     "indicators": len(getattr(eng, "indicators", ())), "count": eng.count(),
                     "count_ok": eng.count() == want, "skew": skew,
                     "engine": type(eng).__name__,
                     "wcoj_views": build.get("wcoj_views", 0),
                     "wcoj_candidates": build.get("candidates", 0),
                     "binary_intermediate": build.get("binary_intermediate", 0)})
    return recs


def _digest(table) -> str:
    import hashlib

    h = hashlib.sha256()
    for col in table.columns:
        h.update(col.to_numpy().tobytes())
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cq_bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_600_000])
    p.add_argument("--peer-size", type=int, default=100_000)
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--batches", type=int, default=30)
    p.add_argument("--epsilons", nargs="+", default=["0", "1/4", "1/2", "3/4", "1"])
    p.add_argument("--cyclic", type=int, default=None, metavar="N",
                   help="only the non-hierarchical queries (indicator projections) at N "
                        "tuples per relation")
    p.add_argument("--skew", action="store_true",
                   help="with --cyclic: hub B values in R(A,B) and S(B,C)")
    p.add_argument("--binary-build", action="store_true",
                   help="with --cyclic: build the views by binary joins (no Generic Join)")
    p.add_argument("--strategy", default="view-trees", choices=["view-trees", "auto"],
                   help="with --cyclic: the view trees for every query (default), or the "
                        "planner's choice (the triangle engine for the triangle count)")
    args = p.parse_args(argv)
    if args.cyclic is not None:
        for r in measure_cyclic(args.cyclic, args.batch_size, args.batches, skew=args.skew,
                                binary_build=args.binary_build,
                                strategy=args.strategy.replace("-", "_")):
            print(f"{r['query']}{' (skewed)' if r['skew'] else ''} [{r['engine']}]: "
                  f"N = {r['n']:,}: load "
                  f"{r['load_s']:.2f} s, {r['mean_s'] * 1e3:.2f} ms per batch, "
                  f"{r['entries']:,} entries held ({r['indicators']} indicator "
                  f"projection(s)), {r['wcoj_views']} view(s) by Generic Join "
                  f"({r['wcoj_candidates']:,} candidates), largest binary intermediate "
                  f"{r['binary_intermediate']:,}, count {r['count']:,} "
                  f"{'checked' if r['count_ok'] else 'DIFFERS'}", flush=True)
        return 0
    for r in measure_flat(args.sizes, args.batch_size, args.batches):
        per_answer = r["request_s"] / max(r["answers"], 1) * 1e6
        print(f"{FLAT_QUERY}: N = {r['n']:,}: {r['mean_s'] * 1e3:.2f} ms per batch (median "
              f"{r['median_s'] * 1e3:.2f}), request {per_answer:.2f} us per answer "
              f"({r['answers']:,} answers), count {r['count']:,} "
              f"{'checked' if r['count_ok'] else 'DIFFERS'}", flush=True)
    for r in measure_eps(args.peer_size, args.batch_size, args.batches, args.epsilons):
        print(f"{EPS_QUERY} at eps = {r['epsilon']}: N = {r['n']:,}: {r['mean_s'] * 1e3:.2f} ms"
              f" per batch, {r['request_s'] * 1e3:.1f} ms per 1,000 requests ({r['answers']:,}"
              f" answers), {r['first_s'] * 1e3:.1f} ms with limit {r['first_limit']} "
              f"({r['first_answers']:,} answers), {r['heavy_values']:,} heavy B values, "
              f"{'same answers as eps = 1' if r['count_ok'] else 'ANSWERS DIFFER'}", flush=True)
    for name in PEER_QUERIES:
        r = measure_peer(name, args.peer_size, args.batch_size, args.batches)
        print(f"{name} {r['query']}: N = {r['n']:,}: gpu_ivm {r['gpu_ivm_mean_s'] * 1e3:.2f} ms,"
              " "
              f"DuckDB delta SQL {r['duckdb_mean_s'] * 1e3:.2f} ms per batch "
              f"({r['duckdb_mean_s'] / r['gpu_ivm_mean_s']:.1f}x), count {r['count']:,} "
              f"{'checked' if r['count_ok'] else 'DIFFERS'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
