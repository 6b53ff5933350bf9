#!/usr/bin/env python3
"""The decision model of specs/decision-model.md in PyTorch, for a side-by-side with
bench/decision_bench on the same GPU: Hugging Face ModernBertModel (sdpa attention) as the encoder,
then the spec's head layers, head_norm, option scorer and action head, in bf16 (scorer, softmax,
features and action head in f32, as the spec's default action dtype).

- Timing: dummy weights of the config's shapes (transformers' own init; the heads N(0, 0.02)),
  the same workloads as decision_bench (short5/short10/short50 of 93-token questions, long10 of
  512, dup50 = 50 questions of which 10 distinct; no dedup here), batched as infera's default
  (length-sorted groups of at most --max-batch-questions questions under --token-budget tokens),
  right-padded; per request: prepare (pad on the host, copy to the GPU), forward (encoder + heads
  + scorer + action head), postprocess (results to the host as Python lists), each synchronised.
  Also the encoder alone (ModernBertModel forward) on 1x93, 50x93, 10x512 and 64x512 tokens.
  The last head layer is computed in full here (transformers has no pruned variant).
- Check: --check-fixture DIR runs the same code in f32 on DIR's real weights and compares with
  DIR/cases.json (decision-micro: the PyTorch reference outputs), so the timed code is the spec's
  model, not an approximation of it.

Usage (torch and transformers as on the GPU machine):
  python3 bench/hf_decision_speed.py --config-dir bench/configs/decision-large --runs 200 \
      --json out.json
  python3 bench/hf_decision_speed.py --check-fixture ../shared/fixtures/decision-micro --device cpu
"""
import argparse
import json
import math
import os
import statistics
import time

import torch
import torch.nn.functional as F
from transformers import ModernBertConfig, ModernBertModel


class DecisionHeads(torch.nn.Module):
    """Head layers (global attention, LayerNorm without bias, no linear biases), head_norm,
    scorer and action head, with the spec's tensor names (heads.{i}.*, head_norm, scorer,
    action.0, action.2)."""

    def __init__(self, d, heads, dc):
        super().__init__()
        self.d, self.heads, self.theta = d, heads, dc["head_rope_theta"]
        f = dc["head_mlp_ratio"] * d
        self.layers = torch.nn.ModuleList()
        for _ in range(dc["num_head_layers"]):
            layer = torch.nn.Module()
            layer.attn_norm = torch.nn.LayerNorm(d, eps=1e-5, bias=False)
            layer.Wqkv = torch.nn.Linear(d, 3 * d, bias=False)
            layer.Wo = torch.nn.Linear(d, d, bias=False)
            layer.mlp_norm = torch.nn.LayerNorm(d, eps=1e-5, bias=False)
            layer.W1 = torch.nn.Linear(d, f, bias=False)
            layer.W2 = torch.nn.Linear(f, d, bias=False)
            self.layers.append(layer)
        self.head_norm = torch.nn.LayerNorm(d, eps=1e-5, bias=False)
        self.scorer = torch.nn.Linear(d, 1)
        self.action = torch.nn.Sequential(
            torch.nn.Linear(d + 4, dc["action_hidden"]),
            torch.nn.GELU(),
            torch.nn.Linear(dc["action_hidden"], len(dc["actions"])),
        )

    def rope(self, x, length):  # x [B, H, L, hd], rotate-half, positions 0..L-1
        hd = x.shape[-1]
        inv = 1.0 / (self.theta ** (torch.arange(0, hd, 2, device=x.device, dtype=torch.float32) / hd))
        freqs = torch.arange(length, device=x.device, dtype=torch.float32)[:, None] * inv[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    def forward(self, h, mask, marker):
        b, length, d = h.shape
        hd = d // self.heads
        keep = mask[:, None, None, :].bool()  # padded keys excluded
        x = h
        for layer in self.layers:
            q, k, v = layer.Wqkv(layer.attn_norm(x)).view(b, length, 3, self.heads, hd).unbind(2)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            q, k = self.rope(q, length), self.rope(k, length)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
            x = x + layer.Wo(a.transpose(1, 2).reshape(b, length, d))
            x = x + layer.W2(F.gelu(layer.W1(layer.mlp_norm(x))))
        h = self.head_norm(x).float()
        logits = self.scorer.float()(h).squeeze(-1)  # [B, L]; only the marker positions are read
        logits = logits.masked_fill(~marker, float("-inf"))
        probs = torch.softmax(logits, dim=-1)  # 0 outside the markers
        n = marker.sum(-1).float()
        top = torch.topk(probs, 2, dim=-1).values
        p1 = top[:, 0]
        p2 = torch.where(n > 1, top[:, 1], torch.zeros_like(p1))
        ent = -(torch.where(probs > 0, probs * probs.clamp_min(1e-45).log(), 0.0)).sum(-1)
        ent = torch.where(n > 1, ent / n.clamp_min(2).log(), torch.zeros_like(ent))
        feats = torch.stack([p1, p2, p1 - p2, ent], dim=-1)
        action_logits = self.action.float()(torch.cat([h[:, 0], feats], dim=-1))
        return logits, probs, feats, action_logits, torch.softmax(action_logits, dim=-1)


def build(config_dir, dtype, device, weights=None):
    enc = ModernBertConfig.from_pretrained(os.path.join(config_dir, "encoder_config.json"))
    enc._attn_implementation = "sdpa"
    with open(os.path.join(config_dir, "decision_config.json")) as f:
        dc = json.load(f)
    torch.manual_seed(1)
    with torch.device(device):  # initialised where it runs (a 400M-parameter CPU init is slow)
        encoder = ModernBertModel(enc)
        heads = DecisionHeads(enc.hidden_size, enc.num_attention_heads, dc)
    for p in heads.parameters():
        torch.nn.init.normal_(p, 0.0, 0.02) if p.dim() > 1 else None
    if weights is not None:
        encoder.load_state_dict({k[len("encoder."):]: v for k, v in weights.items()
                                 if k.startswith("encoder.")})
        heads.load_state_dict({k.replace("heads.", "layers.", 1) if k.startswith("heads.") else k: v
                               for k, v in weights.items() if not k.startswith("encoder.")})
    encoder = encoder.to(device=device, dtype=dtype).eval()
    heads = heads.to(device=device, dtype=dtype).eval()
    return enc, dc, encoder, heads


def run_batch(encoder, heads, dc, seqs, device, sync):
    """One padded batch: (prepare, forward, postprocess) seconds and the host results."""
    t0 = time.perf_counter()
    length = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), length), dc["pad_token_id"], dtype=torch.long)
    mask = torch.zeros((len(seqs), length), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    ids, mask = ids.to(device, non_blocking=True), mask.to(device, non_blocking=True)
    marker = ids == dc["marker_token_id"]
    sync()
    t1 = time.perf_counter()
    h = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
    out = heads(h, mask, marker)
    sync()
    t2 = time.perf_counter()
    logits, probs, feats, a_logits, a_probs = (t.cpu() for t in out)
    marker = marker.cpu()
    results = []
    for i in range(len(seqs)):
        m = marker[i]
        results.append({"option_logits": logits[i][m].tolist(), "option_probs": probs[i][m].tolist(),
                        "features": feats[i].tolist(), "action_logits": a_logits[i].tolist(),
                        "action_probs": a_probs[i].tolist()})
    t3 = time.perf_counter()
    return (t1 - t0, t2 - t1, t3 - t2), results


def batches_of(seqs, cap, budget):
    """infera's default batching: stable sort by length, cut under the cap and the token budget."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    groups, cur, tokens = [], [], 0
    for i in order:
        if cur and (len(cur) == cap or tokens + len(seqs[i]) > budget):
            groups.append(cur)
            cur, tokens = [], 0
        cur.append(i)
        tokens += len(seqs[i])
    if cur:
        groups.append(cur)
    return groups


def workload(name, dc, vocab, gen):
    """Token-id questions of the workload: [CLS] ... [SEP] with 4 option markers."""
    n, distinct, length = {"short5": (5, 5, 93), "short10": (10, 10, 93), "short50": (50, 50, 93),
                           "long10": (10, 10, 512), "dup50": (50, 10, 93)}[name]
    special = {dc["cls_token_id"], dc["sep_token_id"], dc["pad_token_id"], dc["marker_token_id"]}
    base = []
    for _ in range(distinct):
        body = [t for t in torch.randint(5, vocab, (length + 8,), generator=gen).tolist()
                if t not in special][: length - 2]
        for k in range(4):
            body[12 + 3 * k] = dc["marker_token_id"]
        base.append([dc["cls_token_id"]] + body + [dc["sep_token_id"]])
    return [base[i % distinct] for i in range(n)]


def pct(v, q):
    v = sorted(v)
    pos = q * (len(v) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def stat(ms):
    return {"p50_ms": pct(ms, 0.5), "p95_ms": pct(ms, 0.95), "min_ms": min(ms),
            "mean_ms": statistics.fmean(ms), "samples_ms": ms}


def check_fixture(path, device):
    from safetensors.torch import load_file
    weights = load_file(os.path.join(path, "model.safetensors"))
    _, dc, encoder, heads = build(path, torch.float32, device,
                                  {k: v.float() for k, v in weights.items()})
    with open(os.path.join(path, "cases.json")) as f:
        cases = json.load(f)["cases"]
    with torch.no_grad():
        _, got = run_batch(encoder, heads, dc, [c["input_ids"] for c in cases], device, lambda: None)
    worst = 0.0
    for c, g in zip(cases, got):
        for key in ("option_logits", "option_probs", "features", "action_logits", "action_probs"):
            d = max(abs(a - b) for a, b in zip(c[key], g[key]))
            worst = max(worst, d if d == d else math.inf)
    print(f"check {path}: max |diff| vs cases.json {worst:.3g} (bound 1e-4)")
    return worst <= 1e-4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config-dir", default="bench/configs/decision-large")
    ap.add_argument("--workload", action="append")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--encoder-runs", type=int, default=50)
    ap.add_argument("--encoder-batch", action="append")
    ap.add_argument("--max-batch-questions", type=int, default=16)
    ap.add_argument("--token-budget", type=int, default=8192)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json")
    ap.add_argument("--check-fixture")
    a = ap.parse_args()
    if a.check_fixture:
        raise SystemExit(0 if check_fixture(a.check_fixture, a.device) else 1)
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    enc, dc, encoder, heads = build(a.config_dir, torch.bfloat16, dev)
    result = {"config_dir": a.config_dir, "torch": torch.__version__,
              "transformers": __import__("transformers").__version__,
              "gpu": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
              "attn_implementation": "sdpa", "dtype": "bfloat16", "workloads": {}, "encoder": {}}
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for spec in a.encoder_batch or ["1x93", "50x93", "10x512", "64x512"]:
            b, length = (int(x) for x in spec.split("x"))
            ids = torch.randint(5, enc.vocab_size, (b, length), generator=gen).to(dev)
            mask = torch.ones_like(ids)
            ms = []
            for r in range(a.warmup + a.encoder_runs):
                sync()
                t = time.perf_counter()
                encoder(input_ids=ids, attention_mask=mask)
                sync()
                if r >= a.warmup:
                    ms.append((time.perf_counter() - t) * 1e3)
            result["encoder"][spec] = stat(ms)
            save(a.json, result)
            print(f"encoder {spec:7s} median {pct(ms, 0.5):8.2f} ms  p95 {pct(ms, 0.95):8.2f}")
        for name in a.workload or ["short5", "short10", "short50", "long10", "dup50"]:
            seqs = workload(name, dc, enc.vocab_size, gen)
            groups = batches_of(seqs, a.max_batch_questions, a.token_budget)
            prep, fwd, post, total = [], [], [], []
            for r in range(a.warmup + a.runs):
                t = time.perf_counter()
                p = f = o = 0.0
                for g in groups:
                    (dp, df, do), _ = run_batch(encoder, heads, dc, [seqs[i] for i in g], dev, sync)
                    p, f, o = p + dp, f + df, o + do
                if r >= a.warmup:
                    total.append((time.perf_counter() - t) * 1e3)
                    prep.append(p * 1e3)
                    fwd.append(f * 1e3)
                    post.append(o * 1e3)
            result["workloads"][name] = {
                "requests": len(total), "questions": len(seqs), "batches": len(groups),
                "tokens": sum(len(s) for s in seqs), "prepare": stat(prep), "forward": stat(fwd),
                "postprocess": stat(post), "end_to_end": stat(total)}
            print(f"{name:8s} n={len(total)} e2e p50 {pct(total, 0.5):8.2f} p95 {pct(total, 0.95):8.2f}"
                  f" | prepare {pct(prep, 0.5):6.2f} forward {pct(fwd, 0.5):8.2f}"
                  f" post {pct(post, 0.5):6.2f} ms (p50), {len(groups)} batches", flush=True)
            save(a.json, result)  # after every workload, so a cut-short run keeps what it measured


def save(path, result):
    if path:
        with open(path, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
