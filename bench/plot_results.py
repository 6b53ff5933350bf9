#!/usr/bin/env python3
"""Draws benchmark result files (schema infera.bench/1, see bench/results/README.md) side by side
as one PNG: a panel per metric, and in each panel one group per result file with its p50 and p95
as bars (min as a tick), the roofline fraction written over the p50 where the run derived one.

    scripts/setup_bench_venv.sh     # .venv with matplotlib
    .venv/bin/python bench/plot_results.py bench/results/causal_lm_*.json -o /tmp/bench.png
    .venv/bin/python bench/plot_results.py A.json B.json --metrics 'decode.*' 'prefill.*.tokens_per_second'
"""
import argparse
import fnmatch
import json
import math
import sys
from pathlib import Path

SCHEMA = "infera.bench/1"


def load(path):
    try:
        result = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"plot_results: {path}: {e}")
    if not isinstance(result, dict) or result.get("schema") != SCHEMA:
        sys.exit(f"plot_results: {path}: not an infera bench result (schema {SCHEMA!r} expected)")
    return result


def group_name(path, result):
    env = result.get("environment", {})
    name = result.get("label") or Path(path).stem
    rev = (env.get("git_revision") or "")[:8]
    details = [d for d in (rev + ("+" if env.get("git_dirty") else "") if rev else "",
                           env.get("weight_format", ""),
                           f"{env['threads']} thr" if "threads" in env else "") if d]
    return name + ("\n" + " ".join(details) if details else "")


def chosen_metrics(results, patterns):
    names = []
    for r in results:
        for name, m in r["metrics"].items():
            wanted = (any(fnmatch.fnmatchcase(name, p) for p in patterns) if patterns
                      else m.get("headline", False))
            if wanted and name not in names:
                names.append(name)
    return names


def number(v):
    return v if isinstance(v, (int, float)) and math.isfinite(v) else None


def short(v):
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="result JSON files, one group each")
    ap.add_argument("-o", "--out", default="bench/results/plot.png", help="PNG to write")
    ap.add_argument("--metrics", nargs="+", help="metric names or globs (default: the headline metrics)")
    ap.add_argument("--columns", type=int, default=3)
    args = ap.parse_args()

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [load(f) for f in args.files]
    groups = [group_name(f, r) for f, r in zip(args.files, results)]
    if len(set(groups)) < len(groups):  # same labels: tell the groups apart by when they ran
        groups = [g + "\n" + r.get("environment", {}).get("created_utc", "")[5:16].replace("T", " ")
                  for g, r in zip(groups, results)]
    metrics = chosen_metrics(results, args.metrics)
    if not metrics:
        sys.exit("plot_results: no metric to plot (check --metrics)")

    cols = max(1, min(args.columns, len(metrics)))
    rows = math.ceil(len(metrics) / cols)
    width = max(4.2, 1.3 * len(groups) + 1.5)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, 3.6 * rows), squeeze=False)
    bar = 0.38
    colors = ("#4C72B0", "#A6BDDB")
    for ax, name in zip(axes.flat, metrics):
        unit, better = "", "higher"
        top = 0.0
        for i, r in enumerate(results):
            m = r["metrics"].get(name)
            if m is None:
                ax.text(i, 0, "n/a", ha="center", va="bottom", fontsize=8, color="gray")
                continue
            unit, better = m.get("unit", ""), m.get("better", "higher")
            s = m["summary"]
            p50, p95, lo = number(s.get("p50")), number(s.get("p95")), number(s.get("min"))
            for offset, value, color in ((-bar / 2, p50, colors[0]), (bar / 2, p95, colors[1])):
                if value is None:
                    continue
                ax.bar(i + offset, value, bar, color=color, edgecolor="black", linewidth=0.5)
                ax.text(i + offset, value, short(value), ha="center", va="bottom", fontsize=7)
                top = max(top, value)
            if lo is not None and s.get("count", 0) > 1:
                ax.hlines(lo, i - bar, i + bar, colors="black", linewidth=1.0, linestyles="dotted")
            fraction = r.get("derived", {}).get("fractions", {}).get(name, {}).get("fraction")
            if number(fraction) is not None and p50 is not None:
                ax.text(i - bar / 2, p50 / 2, f"{100 * fraction:.0f}%", ha="center", va="center",
                        fontsize=8, color="white", fontweight="bold", rotation=90)
            ax.text(i, 0, f"n={s.get('count', 0)}", ha="center", va="bottom", fontsize=6, color="white")
        ax.set_title(f"{name}\n{unit}, {better} is better", fontsize=9)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(groups, fontsize=7)
        ax.set_ylim(0, top * 1.18 if top > 0 else 1)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(metrics):]:
        ax.axis("off")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c, ec="black", lw=0.5) for c in colors]
    handles.append(plt.Line2D([], [], color="black", linestyle="dotted"))
    fig.legend(handles, ["p50", "p95", "min"], loc="upper right", fontsize=8, ncol=3)
    env = results[0].get("environment", {})
    fig.suptitle(f"infera bench: {results[0].get('benchmark', '?')} on {env.get('cpu_model', '?')} "
                 f"({env.get('simd_dispatch_target', '?')}); % = fraction of the roofline", fontsize=10,
                 x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.97 if rows > 1 else 0.92))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(args.out)


if __name__ == "__main__":
    main()
