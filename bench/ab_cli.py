#!/usr/bin/env python3
"""Interleaved A/B(/C...) of `infera run` binaries on one machine in one run.

Each round runs every variant once, in rotating order, so drift and background load hit all of
them alike; the summary is the per-variant median and best, and ratios of medians against the
first variant. Raw samples go to a JSON file. Timings come from `infera run --json`.

--cpu-time (for a machine that others load): each variant also runs with one new token, and with
an 8-token prompt and one new token; the decode rate is new tokens per CPU second (user + sys of
the child: the difference between the first two runs) and the prefill rate prompt tokens per CPU
second (the difference between the last two), which other processes' load barely moves when
--threads 1 (no waiting on descheduled workers). Memory-bandwidth contention still counts.

  bench/ab_cli.py --out bench/results/ab.json --rounds 8 --prompt 128 --new 64 \
      new=build/release/infera old=/path/to/previous/infera ['kv_bf16=build/release/infera --kv-dtype bf16']

Leading NAME=VALUE words of a variant set its environment: 'plain=INFERA_CPU_REPACK=0 build/release/infera'.
"""
import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys

KEYS = ("prefill_tokens_per_second", "decode_tokens_per_second", "peak_rss_mb")
SHORT_PROMPT = 8  # --cpu-time: the run whose cost is subtracted from the prompt's


def run_once(cmd, model, prompt, new, threads):
    env = dict(os.environ)
    while cmd and "=" in cmd[0] and not cmd[0].startswith(("/", ".")):
        name, _, value = cmd[0].partition("=")
        env[name] = value
        cmd = cmd[1:]
    binary, *extra = cmd
    dummy = [] if model.endswith(".gguf") else ["--dummy-weights"]  # a GGUF file has its weights
    full = [binary, "run", "--model", model, *dummy, "--synthetic-prompt", str(prompt),
            "--max-tokens", str(new), "--ignore-eos", "--greedy", "--json",
            "--threads", str(threads), *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(full, check=True, capture_output=True, text=True, env=env).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = json.loads(out.strip().splitlines()[-1])
    result["cpu_seconds"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("variants", nargs="+", help="label=binary [extra args]")
    ap.add_argument("--model", default="../shared/models/qwen3-0.6b")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", required=True)
    ap.add_argument("--label", default="", help="a note stored with the result")
    ap.add_argument("--cpu-time", action="store_true",
                    help="decode tokens per CPU second (see above) instead of wall-clock rates")
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
            row = {k: s[k] for k in KEYS}
            if a.cpu_time:
                one = run_once(cmd, a.model, a.prompt, 1, a.threads)
                short = run_once(cmd, a.model, SHORT_PROMPT, 1, a.threads)
                row["decode_tokens_per_cpu_second"] = (a.new - 1) / max(
                    s["cpu_seconds"] - one["cpu_seconds"], 1e-9)
                row["prefill_tokens_per_cpu_second"] = (a.prompt - SHORT_PROMPT) / max(
                    one["cpu_seconds"] - short["cpu_seconds"], 1e-9)
                s[KEYS[0]] = row["prefill_tokens_per_cpu_second"]
                s[KEYS[1]] = row["decode_tokens_per_cpu_second"]
            samples[label].append(row)
            print(f"round {r} {label}: prefill {s[KEYS[0]]:.1f} decode {s[KEYS[1]]:.2f} tok/s"
                  + (" (per CPU second)" if a.cpu_time else ""), flush=True)
    keys = KEYS + (("prefill_tokens_per_cpu_second", "decode_tokens_per_cpu_second")
                   if a.cpu_time else ())
    summary = {}
    for label, rows in samples.items():
        summary[label] = {k: {"median": statistics.median(x[k] for x in rows),
                              "best": max(x[k] for x in rows) if k != "peak_rss_mb" else
                              min(x[k] for x in rows)} for k in keys}
    base = variants[0][0]
    ratios = {label: {k: summary[label][k]["median"] / summary[base][k]["median"]
                      for k in keys if k != "peak_rss_mb"} for label in summary}
    result = {"label": a.label, "cpu_time": a.cpu_time, "prompt": a.prompt, "new": a.new, "threads": a.threads, "rounds": a.rounds,
              "variants": {label: " ".join(cmd) for label, cmd in variants},
              "samples": samples, "summary": summary, f"ratio_of_medians_to_{base}": ratios}
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    for label in summary:
        line = (f"{label}: median prefill {summary[label][KEYS[0]]['median']:.1f} decode "
                f"{summary[label][KEYS[1]]['median']:.2f} tok/s; vs {base}: prefill "
                f"x{ratios[label][KEYS[0]]:.3f} decode x{ratios[label][KEYS[1]]:.3f}")
        if a.cpu_time:
            line += (f"; per CPU second: prefill {summary[label][keys[-2]]['median']:.1f} "
                     f"(x{ratios[label][keys[-2]]:.3f}) decode "
                     f"{summary[label][keys[-1]]['median']:.2f} (x{ratios[label][keys[-1]]:.3f})")
        print(line)


if __name__ == "__main__":
    sys.exit(main())
