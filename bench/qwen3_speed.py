#!/usr/bin/env python3
"""A/B speed of two infera builds on a model shape, interleaved in one run, over `infera bench`.

    python3 bench/qwen3_speed.py --model ../shared/models/qwen3-0.6b --dummy-weights --repeats 3
    # two builds side by side: rounds alternate the binaries (ABBA), so machine noise hits both
    python3 bench/qwen3_speed.py ... --infera build/release/infera --baseline /tmp/base/build/release/infera
    # anything else goes to `infera bench` as is:
    python3 bench/qwen3_speed.py ... --prompt-tokens 512 --new-tokens 32 -- --prefill-chunk 256

Each round runs `infera bench --repeats 1` once per binary (a fresh process, --warmup unmeasured
repeats first, machine probes skipped unless --machine). Every run's result file is kept under
bench/results/qwen3_speed_<time>/ (plot them with bench/plot_results.py); the summary file
bench/results/qwen3_speed_<time>.json holds min/median/p95 per binary of every headline metric
and, with --baseline, the median of the per-round ratios infera/baseline. Standard library only.
"""
import argparse, json, os, statistics, subprocess, sys, time
from pathlib import Path


def bench_once(binary, args, extra, out):
    cmd = [binary, "bench", "--model", args.model, "--prefill", str(args.prompt_tokens),
           "--decode-context", str(args.prompt_tokens), "--decode-steps", str(args.new_tokens),
           "--repeats", "1", "--warmup", str(args.warmup), "--threads", str(args.threads),
           "--out", str(out), "--quiet", "--label", out.stem]
    if args.dummy_weights:
        cmd.append("--dummy-weights")
    if not args.machine:
        cmd.append("--skip-machine")
    r = subprocess.run(cmd + extra, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"qwen3_speed: {' '.join(cmd + extra)} failed:\n{r.stderr.strip()}")
    result = json.loads(out.read_text())
    if result.get("schema") != "infera.bench/1":
        sys.exit(f"qwen3_speed: {binary} wrote an unknown result format ({out})")
    return cmd + extra, result


def headline(result):
    """metric name -> (p50 of this run, 'higher'|'lower', unit)"""
    return {name: (m["summary"]["p50"], m["better"], m["unit"])
            for name, m in result["metrics"].items() if m.get("headline") and m["summary"]["p50"] is not None}


def summarize(values):
    v = sorted(values)
    p95 = statistics.quantiles(v, n=20, method="inclusive")[-1] if len(v) > 1 else v[0]  # numpy "linear"
    return {"min": v[0], "median": statistics.median(v), "p95": p95, "max": v[-1], "n": len(v)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--infera", default="build/release/infera")
    ap.add_argument("--baseline", help="another infera binary, measured in the same run")
    ap.add_argument("--model", required=True)
    ap.add_argument("--dummy-weights", action="store_true")
    ap.add_argument("--prompt-tokens", type=int, default=128, help="prefill length, and the decode context")
    ap.add_argument("--new-tokens", type=int, default=128, help="decode steps")
    ap.add_argument("--repeats", type=int, default=3, help="rounds (one run of each binary per round)")
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured repeats inside each run")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--machine", action="store_true", help="also run the machine probes (roofline fractions)")
    args, extra = ap.parse_known_args()
    extra = [a for a in extra if a != "--"]

    binaries = {"infera": args.infera}
    if args.baseline:
        binaries["baseline"] = args.baseline
    stamp = time.strftime("%Y%m%d_%H%M%S")
    run_dir = Path("bench/results") / f"qwen3_speed_{stamp}"
    run_dir.mkdir(parents=True, exist_ok=True)
    runs = {name: [] for name in binaries}  # per round: metric -> (p50, better, unit)
    commands, files = {}, {name: [] for name in binaries}
    for i in range(args.repeats):
        order = list(binaries.items())
        if i % 2:
            order.reverse()  # ABBA: drift over the run hits both binaries alike
        for name, binary in order:
            out = run_dir / f"{name}_{i + 1}.json"
            commands[name], result = bench_once(binary, args, extra, out)
            runs[name].append(headline(result))
            files[name].append(str(out))
            h = runs[name][-1]
            p, d = f"prefill.{args.prompt_tokens}.tokens_per_second", f"decode.{args.prompt_tokens}.tokens_per_second"
            print(f"round {i + 1} {name}: prefill {h[p][0]:.1f} tok/s, decode {h[d][0]:.2f} tok/s",
                  file=sys.stderr)

    summary = {}
    for name, rounds in runs.items():
        summary[name] = {m: dict(summarize([r[m][0] for r in rounds]), unit=rounds[0][m][2], better=rounds[0][m][1])
                         for m in rounds[0] if all(m in r for r in rounds)}
    report = {"schema": "infera.qwen3_speed/2", "commands": commands, "cpu_count": os.cpu_count(),
              "run_files": files, "summary": summary}
    if args.baseline:
        ratios = {}
        for m in summary["infera"]:
            if m not in summary["baseline"]:
                continue
            per_round = [a[m][0] / b[m][0] for a, b in zip(runs["infera"], runs["baseline"]) if b[m][0]]
            if not per_round:
                continue
            med = statistics.median(per_round)
            better = summary["infera"][m]["better"]
            ratios[m] = {"median_ratio": med, "round_ratios": per_round, "better": better,
                         # > 1 means infera is faster/smaller, whichever way the metric points
                         "improvement": med if better == "higher" else 1 / med}
        report["ratio_vs_baseline"] = ratios
    path = Path("bench/results") / f"qwen3_speed_{stamp}.json"
    path.write_text(json.dumps(report, indent=1))
    shown = {k: v for k, v in report.items() if k in ("summary", "ratio_vs_baseline")}
    print(json.dumps(shown, indent=1))
    print("summary:", path, "| runs:", run_dir, file=sys.stderr)


if __name__ == "__main__":
    main()
