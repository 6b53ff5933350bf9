#!/usr/bin/env python3
"""Encode throughput of Hugging Face `tokenizers` on the same text as bench/tokenizer_bench.cpp:
the Qwen3 corpus fixture joined with newlines, repeated to --mb megabytes. Single-threaded
(RAYON_NUM_THREADS=1, TOKENIZERS_PARALLELISM=false) so it compares with our single-threaded encode.

  python3 -m venv .venv && .venv/bin/pip install tokenizers
  .venv/bin/python scripts/bench_tokenizer_hf.py [--model DIR] [--corpus FILE] [--mb 8] [--repeats 7]
"""
import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402

import tokenizers  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def summarize(v):
    v = sorted(v)
    at = lambda q: v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]  # noqa: E731
    return v[0], at(0.5), at(0.95)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "..", "shared", "models", "qwen3-0.6b"))
    ap.add_argument("--corpus", default=os.path.join(ROOT, "..", "shared", "fixtures", "tokenizer",
                                                     "qwen3_corpus.jsonl"))
    ap.add_argument("--mb", type=float, default=8)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()

    with open(args.corpus, encoding="utf-8") as f:
        lines = [json.loads(line)["text"] for line in f if line.strip()]
    text_parts, size = [], 0
    while size < args.mb * 1e6:
        for line in lines:
            text_parts.append(line + "\n")
            size += len(line.encode()) + 1
    text = "".join(text_parts)
    text_mb = len(text.encode()) / 1e6
    line_bytes = sum(len(line.encode()) for line in lines)
    tok = tokenizers.Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))

    t0 = time.perf_counter()
    n_ids = len(tok.encode(text, add_special_tokens=False).ids)
    cold = text_mb / (time.perf_counter() - t0)
    whole, per_line = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        tok.encode(text, add_special_tokens=False)
        whole.append(text_mb / (time.perf_counter() - t0))
    passes = max(1, int(len(text.encode()) / line_bytes))
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for _ in range(passes):
            for line in lines:
                tok.encode(line, add_special_tokens=False)
        per_line.append(passes * line_bytes / 1e6 / (time.perf_counter() - t0))
    w, p = summarize(whole), summarize(per_line)
    print(f"text: {text_mb:.2f} MB, {n_ids} ids, {args.repeats} repeats, tokenizers {tokenizers.__version__}")
    print(f"HF tokenizers encode, whole text, first run: {cold:.2f} MB/s")
    print("HF tokenizers encode, whole text   MB/s: min %.2f  median %.2f  p95 %.2f" % w)
    print(f"HF tokenizers encode, {len(lines)}-line calls MB/s: min %.2f  median %.2f  p95 %.2f" % p)
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MB")


if __name__ == "__main__":
    main()
