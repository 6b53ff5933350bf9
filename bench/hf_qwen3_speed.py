#!/usr/bin/env python3
"""Hugging Face transformers on the shape bench/step_bench measures, for a side-by-side on the same
GPU: a Qwen3 model built from a config.json with random bf16 weights on CUDA, eager attention.

- prefill: one forward over a prompt of each --prefill length (tokens/s; also the time to first
  token less sampling);
- decode: --batch sequences after a --context-token prompt each, one token per step; the manual
  loop with the default dynamic cache, and generate() with cache_implementation="static";
- the device-to-device copy bandwidth (bytes read + written), the memory roofline's ceiling.

Raw samples go to --json. Usage (torch and transformers as on the GPU machine):
  python3 bench/hf_qwen3_speed.py --config ../shared/models/qwen3-0.6b --json out.json
"""
import argparse
import json
import statistics
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM


def sync_time(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t, out


def copy_bandwidth():
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")  # 1 GiB, several times the L2
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    samples = [sync_time(lambda: y.copy_(x))[0] for _ in range(10)]
    return 2 * x.numel() / statistics.median(samples)


def ids(batch, length, vocab, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, length), generator=g).cuda()


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="folder with config.json")
    ap.add_argument("--prefill", default="512,2048")
    ap.add_argument("--batch", default="1,8,64")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--no-static", action="store_true",
                    help="skip generate() with a static cache (it compiles the model first)")
    ap.add_argument("--json")
    a = ap.parse_args()
    config = AutoConfig.from_pretrained(a.config)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model = model.to(torch.bfloat16).eval()
    vocab = config.vocab_size
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(),
           "attention": "eager", "copy_bytes_per_second": copy_bandwidth(),
           "prefill": [], "decode": []}
    print(f"copy bandwidth {out['copy_bytes_per_second'] / 1e12:.2f} TB/s")

    for length in [int(x) for x in a.prefill.split(",")]:
        model(ids(1, length, vocab, 0))  # warm-up
        samples = [sync_time(lambda: model(ids(1, length, vocab, r)))[0] for r in range(1, 4)]
        m = statistics.median(samples)
        out["prefill"].append({"prompt_tokens": length, "seconds": samples,
                               "tokens_per_second": length / m})
        print(f"prefill {length:6d}: {m * 1e3:8.2f} ms {length / m:10.0f} tok/s")

    for batch in [int(x) for x in a.batch.split(",")]:
        prompt = ids(batch, a.context, vocab, batch)
        entry = {"batch": batch, "context": a.context}
        # Dynamic cache, the decode loop written out (what generate() runs per token).
        res = model(prompt, use_cache=True)
        past, nxt = res.past_key_values, res.logits[:, -1].argmax(-1, keepdim=True)
        samples = []
        for s in range(a.steps + 2):
            t, res = sync_time(lambda: model(nxt, past_key_values=past, use_cache=True))
            past, nxt = res.past_key_values, res.logits[:, -1].argmax(-1, keepdim=True)
            if s >= 2:
                samples.append(t)
        m = statistics.median(samples)
        entry["dynamic_cache"] = {"step_seconds": samples, "tokens_per_second": batch / m}
        # Static cache through generate(): time of n new tokens minus time of 1.
        if a.no_static:
            entry["static_cache_generate"] = {"skipped": True}
            out["decode"].append(entry)
            print(f"decode batch {batch:4d}: dynamic {batch / m:9.1f} tok/s")
            continue
        try:
            def gen(n):
                return model.generate(prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                      cache_implementation="static", pad_token_id=0)
            gen(a.steps + 1)  # static caches compile the forward (transformers 5): warm up at
            gen(1)            # both lengths first
            t1, _ = sync_time(lambda: gen(1))
            tn, _ = sync_time(lambda: gen(a.steps + 1))
            entry["static_cache_generate"] = {"seconds_1": t1, "seconds_n": tn, "n": a.steps + 1,
                                              "tokens_per_second": batch * a.steps / (tn - t1)}
        except Exception as e:  # report, do not lose the other numbers
            entry["static_cache_generate"] = {"error": str(e)[:300]}
        out["decode"].append(entry)
        st = entry["static_cache_generate"].get("tokens_per_second", float("nan"))
        print(f"decode batch {batch:4d}: dynamic {batch / m:9.1f} tok/s, static generate {st:9.1f}"
              " tok/s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
