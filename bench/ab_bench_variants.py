#!/usr/bin/env python3
"""Alternating `infera bench` of several variants (binaries and/or environment settings) in one
run: every round runs each variant once, the order rotating by round, so load and drift hit all
alike. Each run's JSON goes under OUT/<round>-<name>/; the summary gives, per variant, the median
decode / prefill tokens/s, the per-round ratios against the first variant (median [min, max]),
bench's own decode fraction of the bandwidth roofline (its probe runs in the same process, so it
moves with the load) and bytes/token x tokens/s over --roofline-gbs (a fixed quiet probe figure),
and run.cpu_share (rounds where it is far below 1 were descheduled); then the ratios of the rounds
in which every variant had cpu_share >= --quiet-share (0.9).

  bench/ab_bench_variants.py --out bench/reference/x --rounds 4 base=/tmp/old/infera \\
      new=build/release/infera 's1=INFERA_CPU_GEMV_STREAMS=1 build/release/infera' -- \\
      -m build/gguf-0.6b/qwen3-0.6b-dummy-q8_0.gguf --threads 2 --prefill 128 \\
      --decode-context 128 --decode-steps 64 --repeats 3 --skip-machine

Leading NAME=VALUE words of a variant set its environment (as bench/ab_cli.py).
"""
import argparse
import glob
import json
import os
import shlex
import statistics
import subprocess
import sys


def run(cmd, out_dir, extra):
    env = dict(os.environ)
    while cmd and "=" in cmd[0] and not cmd[0].startswith(("/", ".")):
        name, _, value = cmd[0].partition("=")
        env[name] = value
        cmd = cmd[1:]
    os.makedirs(out_dir, exist_ok=True)
    subprocess.run([*cmd, "bench", "--out-dir", out_dir, *extra], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = max(glob.glob(os.path.join(out_dir, "*.json")), key=os.path.getmtime)  # this run's
    with open(path) as f:
        return json.load(f)


def metric(d, key):
    return d["metrics"][key]["summary"]["p50"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--roofline-gbs", type=float, default=85.0)
    ap.add_argument("--quiet-share", type=float, default=0.9)
    ap.add_argument("variants", nargs="+", help="NAME=[ENV=VALUE ...] binary [args], then -- bench args")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args, extra = ap.parse_args(argv[:split]), argv[split + 1:]
    variants = []
    for v in args.variants:
        name, _, cmd = v.partition("=")
        variants.append((name, shlex.split(cmd)))
    rows = {name: [] for name, _ in variants}
    for r in range(args.rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for name, cmd in order:
            d = run(cmd, os.path.join(args.out, f"{r}-{name}"), extra)
            ctx = d["config"]["decode_contexts"][0]
            roof = d["derived"]["roofline"]["decode"][str(ctx)]
            pre = d["config"]["prefill_tokens"][0]
            row = {
                "decode": metric(d, f"decode.{ctx}.tokens_per_second"),
                "prefill": metric(d, f"prefill.{pre}.tokens_per_second"),
                "fraction_in_run": roof.get("fraction_of_bandwidth_roofline"),
                "fraction_fixed": roof["bytes_per_token"] * metric(d, f"decode.{ctx}.tokens_per_second")
                / (args.roofline_gbs * 1e9),
                "cpu_share": metric(d, "run.cpu_share"),
                "load": d["environment"].get("load_average_1min_start"),
            }
            rows[name].append(row)
            print(f"round {r} {name}: decode {row['decode']:.1f} tok/s, prefill {row['prefill']:.1f}, "
                  f"{100 * row['fraction_fixed']:.1f} % of {args.roofline_gbs} GB/s, cpu_share "
                  f"{row['cpu_share']:.2f}, load {row['load']}", flush=True)
    first = variants[0][0]
    summary = {}
    for name, _ in variants:
        rs = rows[name]
        s = {k: statistics.median(x[k] for x in rs) for k in ("decode", "prefill", "fraction_fixed", "cpu_share")}
        fr = [x["fraction_in_run"] for x in rs if x["fraction_in_run"] is not None]
        s["fraction_in_run"] = statistics.median(fr) if fr else None
        for k in ("decode", "prefill"):
            ratios = [a[k] / b[k] for a, b in zip(rs, rows[first])]
            s[f"{k}_ratio_median"] = statistics.median(ratios)
            s[f"{k}_ratio_min"], s[f"{k}_ratio_max"] = min(ratios), max(ratios)
            s[f"{k}_ratios"] = ratios
        summary[name] = s
        print(f"{name}: decode {s['decode']:.1f} tok/s x{s['decode_ratio_median']:.3f} "
              f"[{s['decode_ratio_min']:.3f}, {s['decode_ratio_max']:.3f}], prefill {s['prefill']:.1f} "
              f"x{s['prefill_ratio_median']:.3f} [{s['prefill_ratio_min']:.3f}, {s['prefill_ratio_max']:.3f}], "
              f"{100 * s['fraction_fixed']:.1f} % of {args.roofline_gbs} GB/s"
              + (f" ({100 * s['fraction_in_run']:.1f} % of the in-run probe)" if s["fraction_in_run"] else "")
              + f", cpu_share {s['cpu_share']:.2f}")
    # Rounds in which every variant ran undisturbed (cpu_share >= --quiet-share): on a shared
    # machine the only ones whose ratios mean something.
    quiet = [r for r in range(args.rounds)
             if all(rows[name][r]["cpu_share"] >= args.quiet_share for name, _ in variants)]
    print(f"quiet rounds (every cpu_share >= {args.quiet_share}): {quiet}")
    for name, _ in variants:
        s = summary[name]
        for k in ("decode", "prefill"):
            s[f"{k}_quiet_ratios"] = [rows[name][r][k] / rows[first][r][k] for r in quiet]
        s["quiet_fraction_fixed"] = [rows[name][r]["fraction_fixed"] for r in quiet]
        if quiet:
            print(f"  {name}: decode x{statistics.median(s['decode_quiet_ratios']):.3f} "
                  f"{[round(x, 3) for x in s['decode_quiet_ratios']]}, prefill "
                  f"x{statistics.median(s['prefill_quiet_ratios']):.3f} "
                  f"{[round(x, 3) for x in s['prefill_quiet_ratios']]}, % of {args.roofline_gbs} GB/s "
                  f"{[round(100 * x, 1) for x in s['quiet_fraction_fixed']]}")
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump({"variants": [[n, c] for n, c in variants], "bench_args": extra, "rounds": rows,
                   "summary": summary, "roofline_gbs": args.roofline_gbs, "quiet_rounds": quiet},
                  f, indent=1)


if __name__ == "__main__":
    main()
