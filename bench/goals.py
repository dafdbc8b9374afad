"""The project's performance targets, checked against measured records."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class GoalResult:
    goal: str
    target: str
    value: float | None
    shown: str
    met: bool | None  # None: not measured in these results
    note: str = ""

    @property
    def status(self) -> str:
        if self.met is None:
            return "not measured"
        return "met" if self.met else "NOT met"


def replay_speedups(records: list[dict], stat: str = "mean_s") -> dict[tuple[str, int], float]:
    """(system, B) -> recount seconds per batch / system seconds per batch (same run, same B).

    ``stat`` "mean_s" (the definition the goals use) or "median_s" (less sensitive to other
    processes sharing the machine and to a slow first batch)."""
    base = {r["batch_size"]: r[stat] for r in records
            if r.get("record") == "system" and r.get("system") == "recount" and r.get("n")}
    out = {}
    for r in records:
        if r.get("record") != "system" or not r.get("n"):
            continue
        b = r["batch_size"]
        if b in base and r[stat] > 0:
            out[(r["system"], b)] = base[b] / r[stat]
    return out


def _speedup_goal(records: list[dict], batch_size: int, need: float, label: str) -> GoalResult:
    goal = f"gpu_ivm ε=½ vs recounting, B = {label}"
    target = f"≥ {need:,.0f}×"
    sp = replay_speedups(records).get(("gpu_ivm_eps_half", batch_size))
    if sp is None:
        return GoalResult(goal, target, None, "—", None)
    rec = next(r for r in records if r.get("system") == "gpu_ivm_eps_half"
               and r.get("batch_size") == batch_size)
    med = replay_speedups(records, "median_s").get(("gpu_ivm_eps_half", batch_size))
    note = f"R-MAT scale {rec.get('scale')}; ratio of medians {med:,.1f}×"
    if not rec.get("ok"):
        note += "; WRONG final count"
    return GoalResult(goal, target, sp, f"{sp:,.1f}×", sp >= need, note)


def _storage_goal(records: list[dict]) -> GoalResult:
    goal = "ZStore amortized batch cost, largest N / smallest N"
    target = "< 2 (16M vs 1M)"
    sizes = sorted((r for r in records if r.get("scenario") == "storage"
                    and r.get("record") == "size" and r.get("n")), key=lambda r: r["N"])
    if len(sizes) < 2:
        return GoalResult(goal, target, None, "—", None)
    lo, hi = sizes[0], sizes[-1]
    ratio = hi["mean_s"] / lo["mean_s"]
    note = f"N = {hi['N']:,} vs {lo['N']:,}, B = {lo['batch_size']:,}"
    if hi.get("capped") or lo.get("capped"):
        note += "; run capped by the time budget"
    if not (hi.get("ok") and lo.get("ok")):
        note += "; WRONG store contents"
    return GoalResult(goal, target, ratio, f"{ratio:.2f}", ratio < 2, note)


def evaluate(records: list[dict]) -> list[GoalResult]:
    replay = [r for r in records if r.get("scenario") == "replay"]
    return [
        _speedup_goal(replay, 1000, 1000, "10³"),
        _speedup_goal(replay, 100_000, 50, "10⁵"),
        _storage_goal(records),
    ]
