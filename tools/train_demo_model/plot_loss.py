#!/usr/bin/env python3
"""Draws the training and validation loss curves of the demo model's runs as one PNG.

Usage: plot_loss.py --logs tools/train_demo_model/logs --selected e8 --out .../loss_curve.png
"""
import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    rows = [json.loads(line) for line in open(path)]
    train = [(r["tokens"] / 1e6, r["train_loss"]) for r in rows if "train_loss" in r]
    val = [(r["tokens"] / 1e6, r["val_loss"]) for r in rows if "val_loss" in r]
    end = next(r for r in rows if r.get("event") == "end")
    return train, val, end


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logs", type=Path, required=True)
    ap.add_argument("--selected", required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=110)
    colors = {"e5": "tab:green", "e8": "tab:blue", "e12": "tab:orange"}
    for log in sorted(args.logs.glob("*.train_log.jsonl")):
        name = log.name.split(".")[0]
        train, val, end = read(log)
        chosen = name == args.selected
        c = colors.get(name, "tab:gray")
        ax.plot(*zip(*train), color=c, alpha=0.35 if chosen else 0.15, lw=1,
                label=f"{name} train" if chosen else None)
        ax.plot(*zip(*val), color=c, lw=2.2 if chosen else 1.2, ls="-" if chosen else "--",
                label=f"{name} validation (best {end['best_val_loss']:.3f} at step "
                      f"{end['best_step']}){'  <- shipped' if chosen else ''}")
    ax.set_xlabel("training tokens seen (millions; one epoch = 4.46M)")
    ax.set_ylabel("cross-entropy (nats per token)")
    ax.set_ylim(2.0, 7.0)
    ax.set_title("infera-demo (Qwen3, 16.9M parameters): train and validation loss")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
