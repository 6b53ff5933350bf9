#!/usr/bin/env python3
"""Prefill and decode speed of `infera run` on a model shape, repeated, with raw samples kept.

    python3 bench/qwen3_speed.py --model ../shared/models/qwen3-0.6b --dummy-weights \
        --prompt-tokens 128 --new-tokens 128 --repeats 3

Writes bench/results/qwen3_speed_<time>.json with every run's numbers and prints min/median.
Standard library only: it drives the CLI, so what it measures is what users get.
"""
import argparse, json, os, statistics, subprocess, sys, time

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--infera", default="build/release/infera")
    ap.add_argument("--model", required=True)
    ap.add_argument("--dummy-weights", action="store_true")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    cmd = [args.infera, "run", "--model", args.model, "--synthetic-prompt", str(args.prompt_tokens),
           "--max-tokens", str(args.new_tokens), "--ignore-eos", "--greedy", "--json",
           "--threads", str(args.threads)]
    if args.dummy_weights:
        cmd.append("--dummy-weights")
    print("command:", " ".join(cmd), file=sys.stderr)
    samples = []
    for i in range(args.repeats):
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        s = json.loads(out.strip().splitlines()[-1])
        s.pop("ids", None); s.pop("prompt_ids", None); s.pop("text", None)
        samples.append(s)
        print(f"run {i + 1}: prefill {s['prefill_tokens_per_second']:.1f} tok/s, "
              f"decode {s['decode_tokens_per_second']:.2f} tok/s", file=sys.stderr)
    summary = {}
    for key in ("prefill_tokens_per_second", "decode_tokens_per_second", "load_seconds", "peak_rss_mb"):
        values = [s[key] for s in samples]
        summary[key] = {"min": min(values), "median": statistics.median(values), "max": max(values)}
    os.makedirs("bench/results", exist_ok=True)
    path = time.strftime("bench/results/qwen3_speed_%Y%m%d_%H%M%S.json")
    with open(path, "w") as f:
        json.dump({"command": cmd, "cpu_count": os.cpu_count(), "samples": samples, "summary": summary}, f, indent=1)
    print(json.dumps(summary, indent=1))
    print("raw samples:", path, file=sys.stderr)

if __name__ == "__main__":
    main()
