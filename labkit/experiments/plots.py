"""Matplotlib figures for experiment results: inline in a notebook; written to a file with no
pyplot state (and no backend switch) when a path is given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from labkit.fileio import save_figure

PANELS = (
    ("memory (GiB): allocated solid, needed dashed", ("alloc_mem_gib", "need_mem_gib")),
    ("compute (GPUs): allocated solid, needed dashed", ("alloc_compute", "need_compute")),
    ("GPUs busy", ("gpus_busy",)),
    ("pending pods", ("pending",)),
    ("mean wait of the pods placed at each step (s)", ("wait_mean_s",)),
    ("unusable free memory (GiB)", ("frag_gib",)),
)


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def plot_results(results: Any, path: str | Path | None = None) -> Any:
    """Panels over sim time (hours), one line per policy; saved to `path` when given."""
    import matplotlib

    if path is None:
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(len(PANELS) + 1, 1, figsize=(9, 17), constrained_layout=True)
    else:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(9, 17), constrained_layout=True)
        axes = fig.subplots(len(PANELS) + 1, 1)
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    n = len(results.runs)
    for k, run in enumerate(results.runs):
        color = colors[k % len(colors)]
        hours = [s["t"] / 3600 for s in run.timeline]
        # policies often coincide: earlier ones are drawn wider underneath, each with its own marker,
        # so that every line stays visible where they overlap
        width = 1.2 + 1.1 * (n - 1 - k)
        marker = MARKERS[k % len(MARKERS)]
        for ax, (title, keys) in zip(axes, PANELS, strict=False):
            for j, key in enumerate(keys):
                ax.step(hours, [s[key] for s in run.timeline], where="post", color=color, alpha=0.85,
                        linestyle="--" if j else "-", label=run.policy if j == 0 else None, linewidth=width,
                        marker=marker, markevery=(0.02 * k, 0.09), markersize=5 + n - k, zorder=2 + k)
            ax.set_title(title, fontsize=10)
    for ax in axes[:-1]:
        ax.set_xlabel("sim time (h)")
    axes[0].legend(fontsize=8, ncol=3)
    ax = axes[-1]
    names = [r.policy for r in results.runs]
    util = [r.summary["mem_util_pct"] for r in results.runs]
    waits = [r.summary["wait_p95_s"] / 60 for r in results.runs]
    pos = range(len(names))
    ax.bar([p - 0.2 for p in pos], util, width=0.4, label="memory utilisation of allocated (%)")
    ax.bar([p + 0.2 for p in pos], waits, width=0.4, label="p95 wait (min)")
    ax.set_xticks(list(pos), names, fontsize=8)
    ax.legend(fontsize=8)
    ax.set_title("summary", fontsize=10)
    if path is not None:
        save_figure(fig, path, dpi=90)
    return fig
