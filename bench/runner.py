"""Runs the selected scenarios, writes the raw results, regenerates the report and figures."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from bench import machine, plots, report, results
from bench.config import PROFILES
from bench.context import RunContext
from bench.scenarios import SCENARIOS

DEFAULT_RESULTS = machine.REPO / "bench" / "results"
DEFAULT_MD = machine.REPO / "docs" / "benchmarks.md"
DEFAULT_IMG = machine.REPO / "docs" / "img"


@dataclass
class Outputs:
    results_dir: Path
    md_path: Path
    img_dir: Path

    @classmethod
    def for_out(cls, out: Path | None) -> Outputs:
        """Default: ``bench/results/``, ``docs/benchmarks.md``, ``docs/img/``; with ``--out DIR``:
        ``DIR/results/``, ``DIR/benchmarks.md``, ``DIR/img/``."""
        if out is None:
            return cls(DEFAULT_RESULTS, DEFAULT_MD, DEFAULT_IMG)
        out = Path(out)
        return cls(out / "results", out / "benchmarks.md", out / "img")


def _meta_of(records: list[dict]) -> dict:
    """The run's meta record, completed with its end record (duration, final load average)."""
    meta = dict(next((r for r in records if r.get("kind") == "meta"), {}))
    end = next((r for r in records if r.get("kind") == "end"), None)
    if end:
        meta.update(seconds=end.get("seconds"), loadavg_end=end.get("loadavg_end"),
                    scenario_s=end.get("scenario_s", {}))
    return meta


def _scenario_records(records: list[dict], name: str) -> list[dict]:
    return [r for r in records if r.get("kind") == "result" and r.get("scenario") == name]


def regenerate(out: Outputs, current: Path, profile: str) -> Path:
    """Write the report and figures from the result file ``current``; scenarios it lacks are
    taken from the newest earlier result file of the same profile that has them."""
    recs = results.read(current)
    meta = _meta_of(recs)
    sources: dict[str, report.Source] = {}
    for name in SCENARIOS:
        mine = _scenario_records(recs, name)
        if mine:
            sources[name] = report.Source(name, current, meta, mine, current=True)
            continue
        found = results.latest_with(out.results_dir, name, exclude=current, profile=profile)
        if found:
            path, other = found
            sources[name] = report.Source(name, path, _meta_of(other),
                                          _scenario_records(other, name), current=False)
    images = plots.draw({k: s.records for k, s in sources.items()}, out.img_dir)
    return report.write(sources, meta, images, out.md_path, current)


def run(profile_name: str, only: list[str] | None = None, out: Path | None = None,
        progress: bool = True, command: str = "python -m bench") -> dict:
    """Run scenarios ``only`` (default: all) of a profile; return paths and records."""
    profile = PROFILES[profile_name]
    names = list(only) if only else list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise ValueError(f"unknown scenario(s) {unknown}; known: {', '.join(SCENARIOS)}")
    outs = Outputs.for_out(out)
    run_id = time.strftime("%Y%m%d-%H%M%S")
    writer = results.ResultWriter(outs.results_dir, run_id)
    t_run = time.perf_counter()
    writer.write({"kind": "meta", "command": command, "profile": profile.name,
                  "scenarios": names, "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                  "machine": machine.facts(), "loadavg_start": machine.loadavg()})
    ctx = RunContext(profile, emit=writer.write, progress=progress)
    ctx.log(f"[bench] profile {profile.name}, scenarios {', '.join(names)}; results -> "
            f"{writer.path}")
    scenario_s = {}
    for name in names:
        t = time.perf_counter()
        SCENARIOS[name].run(ctx)
        scenario_s[name] = time.perf_counter() - t
        ctx.log(f"[bench] {name} done in {scenario_s[name]:.0f} s "
                f"(load average {machine.loadavg()})")
    total = time.perf_counter() - t_run
    writer.write({"kind": "end", "seconds": total, "scenario_s": scenario_s,
                  "loadavg_end": machine.loadavg()})
    md = regenerate(outs, writer.path, profile.name)
    ctx.log(f"[bench] {total / 60:.1f} min; wrote {md} and figures in {outs.img_dir}")
    return {"results": writer.path, "markdown": md, "img_dir": outs.img_dir,
            "records": writer.records, "seconds": total}


def report_only(profile_name: str, out: Path | None = None) -> Path:
    """Regenerate the report from the newest result file of the profile (no measurement)."""
    outs = Outputs.for_out(out)
    newest = None
    for path in sorted(outs.results_dir.glob("*.jsonl"), reverse=True):
        if _meta_of(results.read(path)).get("profile") == profile_name:
            newest = path
            break
    if newest is None:
        raise FileNotFoundError(f"no {profile_name} results in {outs.results_dir}")
    return regenerate(outs, newest, profile_name)
