"""Smoke test of the benchmark harness (``python -m bench``): the ``tiny`` profile (R-MAT scale
8, a few SNAP batches, ZStore N = 2^12 and 2^13) through the same code path as ``--quick`` /
``--full``, into a temporary output directory. No timing assertions. Peers that are not
installed (duckdb, networkit, scipy) must be reported as ``unavailable``, not dropped."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def bench_main(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    from bench.cli import main

    return main


def _records(out: Path) -> list[list[dict]]:
    files = sorted((out / "results").glob("*.jsonl"))
    return [[json.loads(line) for line in f.read_text().splitlines() if line.strip()]
            for f in files]


def test_bench_tiny_end_to_end(bench_main, tmp_path):
    assert bench_main(["--profile", "tiny", "--out", str(tmp_path), "--no-progress"]) == 0
    (recs,) = _records(tmp_path)
    assert recs[0]["kind"] == "meta" and recs[0]["profile"] == "tiny"
    assert recs[0]["machine"]["cores"] >= 1
    results = [r for r in recs if r.get("kind") == "result"]
    systems = [r for r in results if r.get("record") == "system"]
    replay = [r for r in systems if r["scenario"] == "replay"]
    storage = [r for r in results if r["scenario"] == "storage"]
    assert {r["system"] for r in replay} == {
        "gpu_ivm_auto", "gpu_ivm_eps_half", "gpu_ivm_eps_half_delta", "gpu_ivm_eps_0_delta",
        "gpu_ivm_eps_1_delta", "gpu_ivm_factorized", "recount", "recount_scipy",
        "recount_networkit", "duckdb_recount", "duckdb_delta"}
    # the SNAP scenarios need ../shared/data (present in CI; a clone elsewhere has none)
    from conftest import DATA

    snap = {"windows", "snap_static"} if DATA.is_dir() else set()
    assert {r["scenario"] for r in systems} == {"replay", "celebrity", "scaling", "paired"} | snap
    # the paired scenario: the engines on the same batches, interleaved, every batch timed
    paired = [r for r in systems if r["scenario"] == "paired"]
    by_wl: dict = {}
    for r in paired:
        by_wl.setdefault(r["workload"], set()).add(r["system"])
        assert r["order"] == "interleaved" and r["timed_batches"] == r["n_batches"], r
    assert all(v == {"gpu_ivm_auto", "gpu_ivm_eps_half", "gpu_ivm_eps_1_delta"}
               for v in by_wl.values()), by_wl
    assert {"rmat-8", "rmat-8+8x200"} <= set(by_wl)
    celebrity = [r for r in systems if r["scenario"] == "celebrity"]
    assert {r["system"] for r in celebrity} == {r["system"] for r in replay}
    assert all(r["ok"] for r in celebrity if r["status"] == "ok")
    assert {r["epsilon_chosen"] for r in celebrity if r["system"] == "gpu_ivm_eps_1_delta"} \
        == {"1"}
    queries = [r for r in results if r["scenario"] == "queries"]
    assert {(r["epsilon"], r["maintain"]) for r in queries} == {
        (e, m) for e in ("0", "1/2", "1")
        for m in ("count", "vertex_counts", "edge_counts", "triangles")}
    # every maintained result equals the static recomputation; all variants agree on the count
    assert all(r["ok"] for r in queries)
    assert len({r["count"] for r in queries}) == 1
    assert {r["N"] for r in storage} == {1 << 12, 1 << 13}
    optional = {"recount_scipy": "scipy", "recount_networkit": "networkit",
                "duckdb_recount": "duckdb", "duckdb_delta": "duckdb"}
    for r in systems:
        module = optional.get(r["system"])
        if module and importlib.util.find_spec(module) is None:
            assert r["status"] == "unavailable" and r["detail"], r
            continue
        assert r["status"] == "ok" and r["ok"] is True, r
        assert r["n"] > 0 and len(r["batch_seconds"]) == r["n"]
        assert r["loadavg_start"] is not None
        assert r["final_count"] == r["expected_count"]
        assert r["checks"] and all(got == want for got, want in r["checks"].values())
    for r in storage:
        assert r["ok"] is True, r
        assert r["inserted"] > r["N"] // 2 and not r["capped"]
    # the modes scenario: insert-only and window runs whose counts agreed (with each other and
    # with the static counter), one of each per stream of the profile
    modes = [r for r in results if r["scenario"] == "modes"]
    if DATA.is_dir():
        assert sorted((r["dataset"], r["record"]) for r in modes) == [
            ("CollegeMsg", "growing"), ("CollegeMsg", "relations"), ("CollegeMsg", "window")]
        assert all(r["ok"] and r["status"] == "ok" for r in modes), modes
        for kind in ("growing", "relations"):
            grow = next(r for r in modes if r["record"] == kind)
            assert grow["checked_batches"] and grow["checked_batches"][-1] == grow["batches"] - 1
    _check_cq([r for r in results if r["scenario"] == "cq"],
              importlib.util.find_spec("duckdb") is not None)
    static = [r for r in systems if r["scenario"] == "snap_static"]
    assert all(r["final_count"] == r["published"] == 48_260 for r in static
               if r["status"] == "ok")

    md = (tmp_path / "benchmarks.md").read_text()
    assert "python -m bench --profile tiny" in md
    for heading in ("## What is measured", "## Replay", "## Celebrity churn", "## Scaling",
                    "## Sliding windows", "## Paired", "## Insert-only and sliding-window modes",
                    "## Static SNAP", "## Per-vertex counts", "## Conjunctive queries",
                    "## Spark", "## Storage", "## Goals",
                    "## Where the time goes"):
        assert heading in md
    assert "(written by hand; see below)" in md
    for png in ("replay_throughput.png", "replay_latency.png", "peak_memory.png",
                "scaling_throughput.png", "storage_scaling.png"):
        assert (tmp_path / "img" / png).stat().st_size > 0


def _check_cq(cq: list[dict], with_duckdb: bool) -> None:
    """The cq scenario's records: the flat counts equal a degree count of the final relations,
    the ε runs give the answers of ε = 1, and (with DuckDB) the peer counts equal DuckDB's
    delta SQL after every batch; without DuckDB one ``unavailable`` record that is not a
    failure."""
    peer = ["peer"] * 3 if with_duckdb else ["unavailable"]
    assert sorted(r["record"] for r in cq) == sorted(["eps"] * 3 + ["flat"] * 2 + peer)
    assert [r["epsilon"] for r in cq if r["record"] == "eps"] == ["0", "1/2", "1"]
    assert all(r["ok"] and r["count_ok"] for r in cq if r["record"] != "unavailable"), cq
    if with_duckdb:
        assert {r["query_name"] for r in cq if r["record"] == "peer"} == {
            "2-path", "star", "4-cycle"}
    else:
        (u,) = [r for r in cq if r["record"] == "unavailable"]
        assert u["ok"] is None and u["status"] == "unavailable" and "duckdb" in u["detail"]


def test_bench_cq_without_duckdb(bench_main, tmp_path, monkeypatch):
    """CI has no DuckDB: the cq scenario still measures and checks what needs none, reports
    the DuckDB comparison as unavailable, and the run exits 0."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "duckdb" else real(name, *a))
    assert bench_main(["--profile", "tiny", "--out", str(tmp_path), "--no-progress",
                       "--only", "cq"]) == 0
    (recs,) = _records(tmp_path)
    _check_cq([r for r in recs if r.get("kind") == "result"], with_duckdb=False)
    assert "duckdb is not installed" in (tmp_path / "benchmarks.md").read_text()


def test_bench_keeps_hand_section_and_other_scenarios(bench_main, tmp_path):
    assert bench_main(["--profile", "tiny", "--out", str(tmp_path), "--no-progress",
                       "--only", "replay"]) == 0
    md_path = tmp_path / "benchmarks.md"
    hand = "## Where the time goes\n\nHand-written analysis.\n\n### Sub-section\n\nMore.\n"
    text = md_path.read_text()
    md_path.write_text(text[: text.index("## Where the time goes")] + hand)
    assert bench_main(["--profile", "tiny", "--out", str(tmp_path), "--no-progress",
                       "--only", "storage"]) == 0
    md = md_path.read_text()
    assert md.endswith(hand)
    assert "(written by hand; see below)" not in md
    # the replay section is carried over from the first run, the storage one is new
    assert "## Replay" in md and "come from an earlier run" in md and "## Storage" in md
    assert len(_records(tmp_path)) == 2


def test_timed_out_and_unavailable_peers_are_reported(monkeypatch):
    """A system over its time cap stops with "timed out after N s" and a system that cannot
    run says why; neither is dropped."""
    monkeypatch.syspath_prepend(str(REPO))
    import numpy as np

    from bench import drive, systems
    from bench.config import TINY
    from bench.context import RunContext
    from bench.scenarios.replay import rmat_workload

    wl = rmat_workload(7, 50, 4, seed=1)
    ctx = RunContext(TINY, emit=lambda r: r, progress=False)
    drive.FAILED.clear()
    rec = drive.run_system(ctx, "recount", wl, cap_s=0.0)
    assert rec["status"] == "timed out" and rec["detail"].startswith("timed out after 0 s")
    assert rec["ok"] is None and rec["checks_ok"]
    # a larger graph is then not tried again in the same run
    big = drive.Workload("big", wl.base_src, wl.base_dst, wl.batches, wl.expected,
                         wl.size_edges * 2, 50)
    assert drive.run_system(ctx, "recount", big)["status"] == "skipped"
    drive.FAILED.clear()

    class Missing(systems.RecountSystem):
        @classmethod
        def unavailable(cls):
            return "not installed (test)"

    monkeypatch.setitem(systems.SYSTEMS, "missing_peer", Missing)
    rec = drive.run_system(ctx, "missing_peer", wl)
    assert rec["status"] == "unavailable" and rec["detail"] == "not installed (test)"
    assert np.isfinite(wl.expected[len(wl.batches) - 1])


def test_state_memory_counts_every_stored_tuple():
    """bench.state_memory: the state of a loaded engine holds at least its packed keys and
    multiplicities (16 bytes per stored directed tuple, in h/l plus the transposed heavy part),
    and maintaining results only adds; --factorized reports the views or the budget refusal."""
    import numpy as np

    from bench.state_memory import factorized, state_bytes
    from gpu_ivm import GraphEngine

    rng = np.random.default_rng(2)
    s, d = rng.integers(0, 200, 2000), rng.integers(0, 200, 2000)
    plain, full = GraphEngine(), GraphEngine(maintain=["vertex_counts", "edge_counts",
                                                       "triangles"])
    for g in (plain, full):
        g.load({"src": s, "dst": d})
    assert state_bytes(plain) >= 16 * 2 * plain.num_edges
    assert state_bytes(full) > state_bytes(plain)
    row = factorized(6)
    assert row["tuples_per_relation"] > 0
    assert "view_entries" in row or "V_ST" in row["refused"]


def test_every_profile_names_known_systems_and_scenarios():
    """Each benchmark profile (the kernels profile of issue 14 included) names only systems the
    runner can build, so a profile's run does not fail after minutes of work."""
    from bench.config import PROFILES
    from bench.systems import SYSTEMS, system_class

    system_class("recount")  # registers the peers (bench.peers) in SYSTEMS
    for prof in PROFILES.values():
        for part in (prof.replay, prof.scaling, prof.windows, prof.static, prof.celebrity):
            unknown = set(part.systems) - set(SYSTEMS)
            assert not unknown, (prof.name, type(part).__name__, unknown)


def test_interleaved_runner_balances_and_checks(monkeypatch):
    """``drive.run_interleaved``: every batch goes to each system before the next, in the
    balanced orders (each system after each other one equally often); a system whose count
    is wrong is recorded with ``ok`` False, one that raises as failed (the others go on),
    each with its batches timed."""
    monkeypatch.syspath_prepend(str(REPO))
    from bench import drive, systems
    from bench.context import RunContext
    from bench.system_base import System

    calls = []

    class Fake(System):
        def __init__(self, name, off=0, fail_at=None):
            self.name, self.label, self.off, self.fail_at = name, name, off, fail_at
            self.q = 0

        def load(self, src, dst):
            return 0.0

        def apply(self, batch):
            calls.append((batch["i"], self.name))
            if batch["i"] == self.fail_at:
                raise RuntimeError("boom")
            self.q += len(batch["src"])
            return 1e-3

        def count(self):
            return self.q + self.off

    fakes = {"a": lambda: Fake("a"), "b": lambda: Fake("b", off=1),
             "c": lambda: Fake("c", fail_at=2)}
    for k, f in fakes.items():
        monkeypatch.setitem(systems.SYSTEMS, k, f)
    batches = [{"src": [0] * (i + 1), "dst": [1] * (i + 1), "sign": [1] * (i + 1), "i": i}
               for i in range(4)]
    wl = drive.Workload("fake", [], [], batches, {1: 3, 3: 10}, 0, 1)
    ctx = RunContext.__new__(RunContext)
    ctx.bar = lambda it, **kw: it
    recs = {r["system"]: r for r in drive.run_interleaved(ctx, ["a", "b", "c"], wl)}
    assert [n for i, n in calls if i == 0] == ["a", "b", "c"]
    assert [n for i, n in calls if i == 1] == ["a", "c", "b"]
    assert [n for i, n in calls if i == 2] == ["c", "b", "a"]
    assert [n for i, n in calls if i == 3] == ["b", "a"]  # c failed at batch 2
    assert recs["a"]["ok"] is True and recs["a"]["timed_batches"] == 4
    assert recs["b"]["ok"] is False and recs["b"]["checks"][1] == [4, 3]
    assert recs["c"]["status"] == "failed" and "boom" in recs["c"]["detail"]
    assert all(r["order"] == "interleaved" for r in recs.values())


@pytest.mark.parametrize("n", range(1, 10))
def test_balanced_orders(n, monkeypatch):
    """``drive.balanced_orders``: permutations of the n systems whose concatenation, back to
    the first, has every ordered pair of distinct systems adjacent equally often and no
    system twice in a row (two systems alternate instead), each system in each place
    equally often where the search finds such orders (3 and 4 systems); the rotations where
    it gives up (a budget of 0 steps)."""
    monkeypatch.syspath_prepend(str(REPO))
    from collections import Counter

    from bench import drive

    def pairs(orders):
        seq = [x for o in orders for x in o]
        return Counter(zip(seq, seq[1:] + seq[:1]))

    orders = drive.balanced_orders(n)
    assert all(sorted(o) == list(range(n)) for o in orders)
    places = [Counter(o[p] for o in orders) for p in range(n)]
    if n in (2, 3, 4):
        assert all(c == Counter({x: len(orders) // n for x in range(n)}) for c in places)
    if n >= 3:
        got = pairs(orders)
        assert all(x != y for x, y in got)
        assert set(got) == {(x, y) for x in range(n) for y in range(n) if x != y}
        assert len(set(got.values())) == 1
    rot = drive.balanced_orders(n, budget=0)
    assert n <= 2 or rot == [list(range(k, n)) + list(range(k)) for k in range(n)]


@pytest.mark.parametrize("stream", ["rmat", "celebrity"])
def test_profile_batch_on_both_streams(stream, monkeypatch, capsys):
    """``python -m bench.profile_batch`` profiles the R-MAT stream or celebrity churn (its
    celebrities' degree capped at the graph's ids at small scales) and counts the work of
    exactly the updates it applied in the profile mode: B per batch."""
    monkeypatch.syspath_prepend(str(REPO))
    from bench.profile_batch import main

    assert main(["--scale", "8", "--batch-size", "20", "--batches", "2", "--stream", stream,
                 "--top", "3"]) == 0
    out = capsys.readouterr().out
    name = "celebrity churn on R-MAT" if stream == "celebrity" else "R-MAT"
    assert out.startswith(f"{name} scale 8, B = 20")
    assert "count kernel work over 40 updates" in out
