#!/usr/bin/env python3
"""Prefill and decode speed of `infera run` on a model shape, repeated, with raw samples kept.

    python3 bench/qwen3_speed.py --model ../shared/models/qwen3-0.6b --dummy-weights \
        --prompt-tokens 128 --new-tokens 128 --repeats 3
    # two builds side by side, runs interleaved so machine noise hits both alike:
    python3 bench/qwen3_speed.py ... --infera build/release/infera --baseline /tmp/base/build/infera

Writes bench/results/qwen3_speed_<time>.json with every run's numbers and prints min/median/max
(and median ratios against --baseline). Standard library only: it drives the CLI, so what it
measures is what users get.
"""
import argparse, json, os, statistics, subprocess, sys, time

KEYS = ("prefill_tokens_per_second", "decode_tokens_per_second", "load_seconds", "peak_rss_mb")


def run_once(binary, args):
    cmd = [binary, "run", "--model", args.model, "--synthetic-prompt", str(args.prompt_tokens),
           "--max-tokens", str(args.new_tokens), "--ignore-eos", "--greedy", "--json",
           "--threads", str(args.threads)]
    if args.dummy_weights:
        cmd.append("--dummy-weights")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    s = json.loads(out.strip().splitlines()[-1])
    for k in ("ids", "prompt_ids", "text"):
        s.pop(k, None)
    return cmd, s


def summarize(samples):
    return {k: {"min": min(s[k] for s in samples), "median": statistics.median(s[k] for s in samples),
                "max": max(s[k] for s in samples)} for k in KEYS}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--infera", default="build/release/infera")
    ap.add_argument("--baseline", help="another infera binary to measure in the same run")
    ap.add_argument("--model", required=True)
    ap.add_argument("--dummy-weights", action="store_true")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    binaries = {"infera": args.infera}
    if args.baseline:
        binaries["baseline"] = args.baseline
    samples = {name: [] for name in binaries}
    commands = {}
    for i in range(args.repeats):
        for name, binary in binaries.items():
            commands[name], s = run_once(binary, args)
            samples[name].append(s)
            print(f"run {i + 1} {name}: prefill {s['prefill_tokens_per_second']:.1f} tok/s, "
                  f"decode {s['decode_tokens_per_second']:.2f} tok/s", file=sys.stderr)
    result = {"commands": commands, "cpu_count": os.cpu_count(), "samples": samples,
              "summary": {name: summarize(v) for name, v in samples.items()}}
    if args.baseline:
        med = result["summary"]
        result["ratio_vs_baseline"] = {
            k: med["infera"][k]["median"] / med["baseline"][k]["median"]
            for k in ("prefill_tokens_per_second", "decode_tokens_per_second")}
    os.makedirs("bench/results", exist_ok=True)
    path = time.strftime("bench/results/qwen3_speed_%Y%m%d_%H%M%S.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: v for k, v in result.items() if k in ("summary", "ratio_vs_baseline")}, indent=1))
    print("raw samples:", path, file=sys.stderr)


if __name__ == "__main__":
    main()
