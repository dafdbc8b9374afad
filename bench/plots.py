"""PNG figures for the report (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

REPLAY_PNG = "replay_throughput.png"
LATENCY_PNG = "replay_latency.png"
MEMORY_PNG = "peak_memory.png"
SCALING_PNG = "scaling_throughput.png"
STORAGE_PNG = "storage_scaling.png"

_STYLE = {
    "gpu_ivm_auto": dict(color="C9", marker="*", lw=2.2),
    "gpu_ivm_eps_half": dict(color="C0", marker="o", lw=2.2),
    "gpu_ivm_eps_half_delta": dict(color="C0", marker="s", linestyle="--"),
    "gpu_ivm_eps_0_delta": dict(color="C9", marker="v"),
    "gpu_ivm_eps_1_delta": dict(color="C1", marker="^"),
    "gpu_ivm_factorized": dict(color="C4", marker="D"),
    "spark_driver": dict(color="C8", marker="P"),
    "recount": dict(color="C3", marker="x", linestyle=":"),
    "recount_scipy": dict(color="C5", marker="+", linestyle=":"),
    "recount_networkit": dict(color="C6", marker="1", linestyle=":"),
    "duckdb_recount": dict(color="C7", marker="2", linestyle=":"),
    "duckdb_delta": dict(color="k", marker="*", linestyle="-."),
    "pathway": dict(color="C2", marker="h", linestyle="-."),
}


def _ok_rows(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("record") == "system" and r.get("n")
            and r.get("status", "ok") == "ok"]


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def replay_throughput(records: list[dict], path: Path) -> Path | None:
    rows = _ok_rows(records)
    main_scale = next((r.get("scale") for r in records if r.get("record") == "graph"), None)
    rows = [r for r in rows if main_scale is None or r.get("scale") == main_scale]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    for name in dict.fromkeys(r["system"] for r in rows):
        rs = sorted((r for r in rows if r["system"] == name), key=lambda r: r["batch_size"])
        ax.plot([r["batch_size"] for r in rs], [r["updates_per_s"] for r in rs],
                label=rs[0]["label"], **_STYLE.get(name, {}))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("batch size B (updates per batch)")
    ax.set_ylabel("updates / s (total updates / total batch time)")
    ax.set_title(f"Replay, R-MAT scale {main_scale}: throughput by batch size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return _save(fig, path)


def _pick_batch(records: list[dict], want: int = 1000) -> int | None:
    bs = sorted({r["batch_size"] for r in _ok_rows(records)})
    if not bs:
        return None
    return want if want in bs else min(bs, key=lambda b: abs(np.log10(b) - np.log10(want)))


def replay_latency(records: list[dict], path: Path) -> Path | None:
    B = _pick_batch(records)
    main_scale = next((r.get("scale") for r in records if r.get("record") == "graph"), None)
    rows = [r for r in _ok_rows(records) if r["batch_size"] == B
            and (main_scale is None or r.get("scale") == main_scale)]
    if not rows:
        return None
    rows.sort(key=lambda r: r["median_s"])
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.6), dpi=110)
    data = [np.asarray(r["batch_seconds"]) * 1e3 for r in rows]
    pos = np.arange(len(rows))
    kw = dict(positions=pos, whis=(1, 99), widths=0.6, flierprops=dict(markersize=2, alpha=0.4))
    try:  # matplotlib >= 3.10
        ax.boxplot(data, orientation="horizontal", **kw)
    except TypeError:
        ax.boxplot(data, vert=False, **kw)
    ax.plot([r["p99_s"] * 1e3 for r in rows], pos, "|", color="C3", markersize=14,
            label="p99")
    ax.set_yticks(pos, [f"{r['label']} ({r['timed_batches']} timed)" for r in rows],
                  fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("seconds per batch, ms (log; box: quartiles, line: median, whiskers p1–p99)")
    ax.set_title(f"Per-batch latency, R-MAT scale {main_scale}, B = {B:,}")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path)


def peak_memory(records: list[dict], path: Path) -> Path | None:
    B = _pick_batch(records)
    main_scale = next((r.get("scale") for r in records if r.get("record") == "graph"), None)
    rows = [r for r in records if r.get("record") == "system" and r.get("batch_size") == B
            and (main_scale is None or r.get("scale") == main_scale)
            and r.get("peak_rss_bytes")]
    if not rows:
        return None
    rows.sort(key=lambda r: r["peak_rss_bytes"])
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(rows) + 1.6), dpi=110)
    vals = [r["peak_rss_bytes"] / 2**30 for r in rows]
    colors = [_STYLE.get(r["system"], {}).get("color", "C7") for r in rows]
    ax.barh(np.arange(len(rows)), vals, color=colors, alpha=0.8)
    for i, (r, v) in enumerate(zip(rows, vals)):
        tag = "" if r.get("status", "ok") == "ok" else f"  ({r['status']})"
        ax.text(v, i, f" {v:.2f} GiB{tag}", va="center", fontsize=7)
    ax.set_yticks(np.arange(len(rows)), [r["label"] for r in rows], fontsize=7)
    ax.set_xlabel("peak resident memory during load + batches, GiB (includes the runner's "
                  "own arrays)")
    ax.set_title(f"Peak memory per system, R-MAT scale {main_scale}, B = {B:,}")
    ax.set_xlim(0, max(vals) * 1.35)
    ax.grid(True, axis="x", alpha=0.3)
    return _save(fig, path)


def scaling_throughput(records: list[dict], path: Path) -> Path | None:
    rows = _ok_rows(records)
    if not rows:
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5), dpi=110)
    for name in dict.fromkeys(r["system"] for r in rows):
        rs = sorted((r for r in rows if r["system"] == name), key=lambda r: r["size_edges"])
        x = [r["size_edges"] for r in rs]
        ax1.plot(x, [r["updates_per_s"] for r in rs], label=rs[0]["label"],
                 **_STYLE.get(name, {}))
        ax2.plot(x, [r["median_s"] * 1e3 for r in rs], label=rs[0]["label"],
                 **_STYLE.get(name, {}))
    B = rows[0]["batch_size"]
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("edges in the base graph (R-MAT scales)")
        ax.grid(True, which="both", alpha=0.3)
    ax1.set_ylabel("updates / s")
    ax1.set_title(f"Throughput vs graph size, B = {B:,}")
    ax2.set_ylabel("median ms per batch")
    ax2.set_title(f"Median batch time vs graph size, B = {B:,}")
    ax1.legend(fontsize=7)
    return _save(fig, path)


def storage_scaling(records: list[dict], path: Path) -> Path | None:
    rows = sorted((r for r in records if r.get("record") == "size" and r.get("n")),
                  key=lambda r: r["N"])
    if not rows:
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5), dpi=110)
    data = [np.asarray(r["batch_seconds"]) * 1e3 for r in rows]
    labels = [f"N = 2^{r['N'].bit_length() - 1}\n({r['N']:,})" for r in rows]
    pos = np.arange(1, len(rows) + 1)
    ax1.boxplot(data, positions=pos, whis=(1, 99), showfliers=True,
                flierprops=dict(markersize=2, alpha=0.4))
    ax1.set_xticks(pos, labels)
    means = [r["mean_s"] * 1e3 for r in rows]
    ax1.plot(pos, means, "D", color="C3", label="mean (amortized, incl. merges)")
    for p, m in zip(pos, means):
        ax1.annotate(f"{m:.3f} ms", (p, m), textcoords="offset points", xytext=(8, 4),
                     fontsize=8, color="C3")
    ax1.set_yscale("log")
    ax1.set_ylabel(f"time per batch of {rows[0]['batch_size']:,} keys (ms, log)")
    ax1.set_title("Per-batch time (box: quartiles, whiskers: p1–p99)")
    ax1.grid(True, axis="y", which="both", alpha=0.3)
    ax1.legend(fontsize=8, loc="upper left")
    for i, r in enumerate(rows):
        s = np.asarray(r["batch_seconds"]) * 1e3
        x = np.arange(s.shape[0]) / max(s.shape[0] - 1, 1)
        ax2.plot(x, s, lw=0.6, alpha=0.7, color=f"C{i}",
                 label=f"N = {r['N']:,} ({r['batches']:,} batches)")
    ax2.set_yscale("log")
    ax2.set_xlabel("fraction of the run (batches in order)")
    ax2.set_ylabel("ms per batch (log)")
    ax2.set_title("Per-batch time over the run (spikes: merges)")
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend(fontsize=8)
    return _save(fig, path)


def draw(by_scenario: dict[str, list[dict]], img_dir: Path) -> dict[str, dict[str, Path]]:
    """Draw every figure whose scenario has results; return scenario -> {figure: path}."""
    out: dict[str, dict[str, Path]] = {}
    jobs = {
        "replay": ((REPLAY_PNG, replay_throughput), (LATENCY_PNG, replay_latency),
                   (MEMORY_PNG, peak_memory)),
        "scaling": ((SCALING_PNG, scaling_throughput),),
        "storage": ((STORAGE_PNG, storage_scaling),),
    }
    for scen, figs in jobs.items():
        recs = by_scenario.get(scen)
        if not recs:
            continue
        for fname, fn in figs:
            p = fn(recs, img_dir / fname)
            if p:
                out.setdefault(scen, {})[fname] = p
    return out
