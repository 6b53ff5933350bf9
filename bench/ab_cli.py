#!/usr/bin/env python3
"""Interleaved A/B(/C...) of `infera run` binaries on one machine in one run.

Each round runs every variant once, in rotating order, so drift and background load hit all of
them alike; the summary is the per-variant median and min, and ratios of medians against the
first variant. Raw samples go to a JSON file. Timings come from `infera run --json`.

  bench/ab_cli.py --out bench/results/ab.json --rounds 8 --prompt 128 --new 64 \
      new=build/release/infera old=/path/to/previous/infera ['kv_bf16=build/release/infera --kv-dtype bf16']
"""
import argparse
import json
import shlex
import statistics
import subprocess
import sys

KEYS = ("prefill_tokens_per_second", "decode_tokens_per_second", "peak_rss_mb")


def run_once(cmd, model, prompt, new, threads):
    binary, *extra = cmd
    full = [binary, "run", "--model", model, "--dummy-weights", "--synthetic-prompt", str(prompt),
            "--max-tokens", str(new), "--ignore-eos", "--greedy", "--json",
            "--threads", str(threads), *extra]
    out = subprocess.run(full, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("variants", nargs="+", help="label=binary [extra args]")
    ap.add_argument("--model", default="../shared/models/qwen3-0.6b")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    variants = []
    for v in a.variants:
        label, _, cmd = v.partition("=")
        variants.append((label, shlex.split(cmd)))
    samples = {label: [] for label, _ in variants}
    for r in range(a.rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for label, cmd in order:
            s = run_once(cmd, a.model, a.prompt, a.new, a.threads)
            samples[label].append({k: s[k] for k in KEYS})
            print(f"round {r} {label}: prefill {s[KEYS[0]]:.1f} decode {s[KEYS[1]]:.2f} tok/s",
                  flush=True)
    summary = {}
    for label, rows in samples.items():
        summary[label] = {k: {"median": statistics.median(x[k] for x in rows),
                              "best": max(x[k] for x in rows) if k != "peak_rss_mb" else
                              min(x[k] for x in rows)} for k in KEYS}
    base = variants[0][0]
    ratios = {label: {k: summary[label][k]["median"] / summary[base][k]["median"] for k in KEYS[:2]}
              for label in summary}
    result = {"prompt": a.prompt, "new": a.new, "threads": a.threads, "rounds": a.rounds,
              "variants": {label: " ".join(cmd) for label, cmd in variants},
              "samples": samples, "summary": summary, f"ratio_of_medians_to_{base}": ratios}
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    for label in summary:
        print(f"{label}: median prefill {summary[label][KEYS[0]]['median']:.1f} decode "
              f"{summary[label][KEYS[1]]['median']:.2f} tok/s; vs {base}: prefill "
              f"x{ratios[label][KEYS[0]]:.3f} decode x{ratios[label][KEYS[1]]:.3f}")


if __name__ == "__main__":
    sys.exit(main())
