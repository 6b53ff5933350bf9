#!/usr/bin/env python3
"""Trains the infera demo model: transformers' Qwen3ForCausalLM on the tokenized corpus.

Reads <data>/{train,val}.u16 and the tokenizer files written by train_tokenizer.py. Samples random
windows of --seq tokens from the training ids (seeded), trains with AdamW and a warmup + cosine
schedule in bf16 autocast, evaluates the whole validation split every --eval-every steps, and keeps
the weights with the lowest validation loss (the corpus is small, so later steps can overfit).
Writes to --out:
  model/            the best weights as a Hugging Face folder (bf16; sharded under --shard-mb so
                    each file fits the device tool's transfer limit; merge_shards.py joins them)
  train_log.jsonl   one line per logged step: step, tokens, train_loss (that step's batch),
                    val_loss (the whole split), lr, seconds
  samples.txt       a few sampled continuations from the final model
Stops early, keeping the best weights, when --time-budget seconds have passed.

Usage: train.py --data DIR --out DIR [--steps 1100 --batch 32 --seq 1024 --seed 12 ...]
"""
import argparse
import json
import math
import shutil
import time
from pathlib import Path

import numpy as np
import torch
from transformers import AutoTokenizer, GenerationConfig, Qwen3Config, Qwen3ForCausalLM

PROMPTS = ["Elizabeth could not help", "And the LORD said unto Moses,",
           "The json module provides"]


def make_config(args, vocab, eot):
    return Qwen3Config(
        vocab_size=vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
        num_hidden_layers=args.layers, num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads, head_dim=args.head_dim, hidden_act="silu",
        max_position_embeddings=args.seq, rms_norm_eps=1e-6, rope_theta=args.rope_theta,
        tie_word_embeddings=True, attention_bias=False, attention_dropout=args.attn_dropout,
        use_sliding_window=False, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot,
        initializer_range=0.02, use_cache=True)


def lr_at(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = min(1.0, (step - args.warmup) / max(1, args.steps - args.warmup))
    return args.lr * (args.min_lr_ratio + (1 - args.min_lr_ratio) * 0.5 *
                      (1 + math.cos(math.pi * progress)))


@torch.no_grad()
def evaluate(model, val, args, device, amp):
    """Mean next-token loss over the whole validation split, in windows of --seq tokens."""
    model.eval()
    n = (len(val) - 1) // args.seq
    total, count = 0.0, 0
    for start in range(0, n, args.batch):
        rows = range(start, min(n, start + args.batch))
        x = torch.stack([val[r * args.seq:(r + 1) * args.seq] for r in rows]).to(device)
        y = torch.stack([val[r * args.seq + 1:(r + 1) * args.seq + 1] for r in rows]).to(device)
        with amp:
            logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.size(-1)),
                                                 y.reshape(-1), reduction="sum")
        total += loss.item()
        count += y.numel()
    model.train()
    return total / count


def save_model(state, config, out, args):
    """The HF folder without the tokenizer (assemble_model.py adds it): config, generation
    config, bf16 weights (sharded)."""
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    cfg = Qwen3Config.from_dict(config.to_dict())
    cfg.attention_dropout = 0.0  # training-only regularization
    export = Qwen3ForCausalLM(cfg)
    export.load_state_dict(state)
    export.to(torch.bfloat16)
    export.generation_config = GenerationConfig(
        bos_token_id=cfg.bos_token_id, eos_token_id=cfg.eos_token_id,
        pad_token_id=cfg.pad_token_id, do_sample=True, temperature=0.8, top_k=40, top_p=0.95,
        repetition_penalty=1.1)
    export.save_pretrained(tmp, safe_serialization=True, max_shard_size=f"{args.shard_mb}MB")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--steps", type=int, default=1100)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-ratio", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--attn-dropout", type=float, default=0.1)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--intermediate", type=int, default=1152)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--time-budget", type=float, default=1e9, help="seconds; then stop and save")
    ap.add_argument("--shard-mb", type=int, default=15)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    started = time.time()
    args.out.mkdir(parents=True, exist_ok=True)

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    device = torch.device(args.device)
    amp = torch.autocast(device_type=device.type, dtype=torch.bfloat16)

    tokens = json.loads((args.data / "tokens.json").read_text())
    vocab = tokens["vocab"]
    tokenizer = AutoTokenizer.from_pretrained(args.data)
    eot = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    train = torch.from_numpy(np.fromfile(args.data / "train.u16", dtype=np.uint16).astype(np.int64))
    val = torch.from_numpy(np.fromfile(args.data / "val.u16", dtype=np.uint16).astype(np.int64))

    config = make_config(args, vocab, eot)
    model = Qwen3ForCausalLM(config).to(device)
    params = sum(p.numel() for p in model.parameters())  # tied embeddings counted once
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
                            fused=device.type == "cuda")
    gen = torch.Generator().manual_seed(args.seed)
    log = open(args.out / "train_log.jsonl", "w")
    header = {"event": "start", "args": {k: str(v) for k, v in vars(args).items()},
              "parameters": params, "train_tokens": len(train), "val_tokens": len(val),
              "torch": torch.__version__, "device": str(torch.cuda.get_device_name(device))
              if device.type == "cuda" else "cpu"}
    print(json.dumps(header), flush=True)
    log.write(json.dumps(header) + "\n")

    best = (float("inf"), -1, None)
    tokens_seen, t0 = 0, time.time()
    step = 0
    for step in range(args.steps + 1):
        if step % args.eval_every == 0 or step == args.steps:
            val_loss = evaluate(model, val, args, device, amp)
            if val_loss < best[0]:
                best = (val_loss, step, {k: v.detach().float().cpu().clone()
                                         for k, v in model.state_dict().items()})
            rec = {"step": step, "tokens": tokens_seen, "epochs": tokens_seen / len(train),
                   "val_loss": val_loss, "val_ppl": math.exp(val_loss),
                   "seconds": time.time() - started}
            print(json.dumps(rec), flush=True)
            log.write(json.dumps(rec) + "\n")
            log.flush()
        if step == args.steps or time.time() - started > args.time_budget:
            break
        lr = lr_at(step, args)
        for group in opt.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, len(train) - args.seq - 1, (args.batch,), generator=gen)
        x = torch.stack([train[s:s + args.seq] for s in starts]).to(device, non_blocking=True)
        y = torch.stack([train[s + 1:s + args.seq + 1] for s in starts]).to(device,
                                                                             non_blocking=True)
        with amp:
            logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens_seen += x.numel()
        if (step + 1) % args.log_every == 0:  # reading the loss syncs the GPU: only when logged
            elapsed = time.time() - t0
            rec = {"step": step + 1, "tokens": tokens_seen, "epochs": tokens_seen / len(train),
                   "train_loss": loss.item(), "lr": lr,
                   "tokens_per_second": tokens_seen / elapsed, "seconds": time.time() - started}
            print(json.dumps(rec), flush=True)
            log.write(json.dumps(rec) + "\n")

    final = {"event": "end", "steps": step, "tokens_seen": tokens_seen,
             "epochs": tokens_seen / len(train), "best_val_loss": best[0],
             "best_val_ppl": math.exp(best[0]), "best_step": best[1],
             "parameters": params, "seconds": time.time() - started}
    print(json.dumps(final), flush=True)
    log.write(json.dumps(final) + "\n")
    log.close()
    save_model(best[2], config, args.out / "model", args)

    # a few continuations from the saved weights, as a first look
    export = Qwen3ForCausalLM.from_pretrained(args.out / "model", dtype=torch.float32).to(device)
    with open(args.out / "samples.txt", "w") as f:
        for prompt in PROMPTS:
            ids = tokenizer(prompt, return_tensors="pt").input_ids.to(device)
            torch.manual_seed(args.seed)
            outp = export.generate(ids, max_new_tokens=80, do_sample=True, temperature=0.8,
                                   top_k=40, top_p=0.95, repetition_penalty=1.1)
            f.write(f"--- {prompt}\n{tokenizer.decode(outp[0])}\n\n")
    print((args.out / "samples.txt").read_text(), flush=True)


if __name__ == "__main__":
    main()
