"""Tables of helper cudah's H200 run: per build, the median prefill tok/s of each A/B round, the
ratio to lead5's build in the same round, and the slow steps (over 1.25x the fastest: the
streamed ones, whose KV pools step_bench allocated at new addresses) apart from the others. Usage: python3 ab_summary.py"""
import json
import statistics
from pathlib import Path

HERE = Path(__file__).parent
for tokens in (512, 2048):
    print(f"prefill {tokens}")
    for build in ("old", "new", "gemmex"):
        rates, slow, fast = [], [], []
        for i in (1, 2, 3):
            d = json.loads((HERE / f"ab{i}_{build}.json").read_text())
            old = json.loads((HERE / f"ab{i}_old.json").read_text())
            p = next(p for p in d["prefill"] if p["prompt_tokens"] == tokens)
            o = next(p for p in old["prefill"] if p["prompt_tokens"] == tokens)
            rates.append(f"{p['tokens_per_second']:,.0f} (x{p['tokens_per_second'] / o['tokens_per_second']:.3f})")
            s = p["seconds"]
            slow += [x * 1e3 for x in s if x > 1.25 * min(s)]
            fast += [x * 1e3 for x in s if x <= 1.25 * min(s)]
        print(f"  {build:7s} median tok/s per round: {' / '.join(rates)}; "
              f"fast steps {len(fast)}, median {statistics.median(fast):.2f} ms; "
              f"slow steps {len(slow)}, median {statistics.median(slow):.2f} ms")
