#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Plot what `vballoon-sim compare --json` wrote: bytes sent, total time, host CPU and
downtime per strategy, one group of bars per workload. The output format follows the
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


def plot(results, setup, out_path):
    workloads = ordered_unique(r["workload"] for r in results)
    strategies = ordered_unique(r["strategy"] for r in results)
    by_key = {(r["workload"], r["strategy"]): r for r in results}
    width = 0.8 / len(strategies)
    fig, axes = plt.subplots(1, len(PANELS), figsize=(5 * len(PANELS), 5))
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
    plot(results, data.get("setup", {}), argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
