"""PNG figures for the report (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

REPLAY_PNG = "replay_throughput.png"
STORAGE_PNG = "storage_scaling.png"

_STYLE = {
    "gpu_ivm_eps_half": dict(color="C0", marker="o"),
    "gpu_ivm_eps_half_delta": dict(color="C2", marker="s", linestyle="--"),
    "gpu_ivm_eps_1_delta": dict(color="C1", marker="^"),
    "recount": dict(color="C3", marker="x", linestyle=":"),
}


def replay_throughput(records: list[dict], path: Path) -> Path | None:
    rows = [r for r in records if r.get("record") == "system" and r.get("n")]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    order = list(dict.fromkeys(r["system"] for r in rows))
    for name in order:
        rs = sorted((r for r in rows if r["system"] == name), key=lambda r: r["batch_size"])
        ax.plot([r["batch_size"] for r in rs], [r["updates_per_s"] for r in rs],
                label=rs[0]["label"], **_STYLE.get(name, {}))
    scale = rows[0].get("scale")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("batch size B (updates per batch)")
    ax.set_ylabel("updates / s (total updates / total batch time)")
    ax.set_title(f"Replay, R-MAT scale {scale}: throughput by batch size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


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
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def draw(by_scenario: dict[str, list[dict]], img_dir: Path) -> dict[str, Path]:
    """Draw every figure whose scenario has results; return scenario -> image path."""
    out = {}
    if by_scenario.get("replay"):
        p = replay_throughput(by_scenario["replay"], img_dir / REPLAY_PNG)
        if p:
            out["replay"] = p
    if by_scenario.get("storage"):
        p = storage_scaling(by_scenario["storage"], img_dir / STORAGE_PNG)
        if p:
            out["storage"] = p
    return out
