#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Plot what `vballoon-sim compare --json` wrote: bytes sent, total time, host CPU and
downtime per strategy (the median run), one group of bars per workload, and the crossover:
hint+zero-detect's total time against zero-detect's at 1, 10, 25, 100 Gbit/s and unlimited,
median and min-max over the runs, one line per workload. The output format follows the
file name (.png or .svg).

    tools/plot_comparison.py results.json comparison.svg
"""
import json
import sys

try:
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit(f"{sys.argv[0]}: matplotlib is missing: install python3-matplotlib (ci/install-deps.sh) "
             "and run this with Debian's /usr/bin/python3")

PANELS = [
    ("bytes_sent", "data sent (GiB)", 1 / (1 << 30)),
    ("total_ms", "total time (s)", 1 / 1000),
    ("host_cpu_ms", "host CPU (s)", 1 / 1000),
    ("downtime_ms", "downtime (ms)", 1),
]


def ordered_unique(values):
    seen = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def median_runs(results):
    """The run with the median total time of each workload and strategy."""
    runs = {}
    for r in results:
        runs.setdefault((r["workload"], r["strategy"]), []).append(r)
    chosen = {}
    for key, rows in runs.items():
        rows = sorted(rows, key=lambda r: r["total_ms"])
        chosen[key] = rows[(len(rows) - 1) // 2]
    return chosen


def plot_crossover(ax, summary):
    ax.set_title("hint+zero-detect / zero-detect, total time")
    labels = None
    for entry in summary:
        points = entry["crossover"]
        labels = ["unlimited" if p["link_gbit"] is None else f"{p['link_gbit']:g} Gbit/s" for p in points]
        median = [p["time_ratio"]["median"] for p in points]
        low = [m - p["time_ratio"]["min"] for m, p in zip(median, points)]
        high = [p["time_ratio"]["max"] - m for m, p in zip(median, points)]
        ax.errorbar(range(len(points)), median, yerr=[low, high], marker="o", capsize=3,
                    label=entry["workload"])
    if labels:
        ax.set_xticks(range(len(labels)), labels, rotation=30)
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("ratio (1 = hints gain nothing)")
    ax.legend(fontsize="small")


def plot(results, setup, summary, out_path):
    workloads = ordered_unique(r["workload"] for r in results)
    strategies = ordered_unique(r["strategy"] for r in results)
    by_key = median_runs(results)
    width = 0.8 / len(strategies)
    panels = len(PANELS) + (1 if summary else 0)
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 5))
    if summary:
        plot_crossover(axes[-1], summary)
    for ax, (field, label, scale) in zip(axes, PANELS):
        for i, strategy in enumerate(strategies):
            xs, heights = [], []
            for w, workload in enumerate(workloads):
                row = by_key.get((workload, strategy))
                if row is not None:
                    xs.append(w + (i - (len(strategies) - 1) / 2) * width)
                    heights.append(row[field] * scale)
            ax.bar(xs, heights, width, label=strategy)
        ax.set_xticks(range(len(workloads)), workloads)
        ax.set_title(label)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(strategies), fontsize="small")
    title = "vballoon-sim compare"
    if setup.get("ram_mib"):
        title += f": {setup['ram_mib']} MiB guest"
    if setup.get("host"):
        link = setup.get("link_bytes_per_second")
        link = "unlimited link" if link is None else f"{link * 8 / 1e9:g} Gbit/s"
        title += f", host {setup['host']}, {link}, {setup.get('repeat', 1)} run(s) per cell"
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.07, 1, 1))  # room for the legend below
    fig.savefig(out_path)


def main(argv):
    if len(argv) != 3 or not argv[2].endswith((".png", ".svg")):
        print(f"usage: {argv[0]} RESULTS.json OUT.png|OUT.svg", file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            data = json.load(f)
        results = data["results"]
    except (OSError, ValueError, KeyError) as error:
        print(f"{argv[0]}: cannot read results from {argv[1]}: {error}", file=sys.stderr)
        return 1
    if not results:
        print(f"{argv[0]}: {argv[1]} holds no results", file=sys.stderr)
        return 1
    plot(results, data.get("setup", {}), data.get("summary", []), argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
