"""Smoke test of the benchmark harness (``python -m bench``): the ``tiny`` profile (R-MAT scale
8, ZStore N = 2^12 and 2^13) through the same code path as ``--quick`` / ``--full``, into a
temporary output directory. No timing assertions."""

from __future__ import annotations

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
    replay = [r for r in results if r["scenario"] == "replay" and r["record"] == "system"]
    storage = [r for r in results if r["scenario"] == "storage"]
    assert {r["system"] for r in replay} == {"gpu_ivm_eps_half", "gpu_ivm_eps_half_delta",
                                            "gpu_ivm_eps_1_delta", "recount"}
    assert {r["N"] for r in storage} == {1 << 12, 1 << 13}
    for r in replay + storage:
        assert r["ok"] is True, r
        assert r["n"] > 0 and len(r["batch_seconds"]) == r["n"]
        assert r["loadavg_start"] is not None
    for r in replay:
        assert r["final_count"] == r["expected_count"]
    for r in storage:
        assert r["inserted"] > r["N"] // 2 and not r["capped"]

    md = (tmp_path / "benchmarks.md").read_text()
    assert "python -m bench --profile tiny" in md
    for heading in ("## What is measured", "## Replay", "## Storage", "## Goals",
                    "## Where the time goes"):
        assert heading in md
    assert "(written by hand; see below)" in md
    for png in ("replay_throughput.png", "storage_scaling.png"):
        assert (tmp_path / "img" / png).stat().st_size > 0


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
