#!/usr/bin/env python3
"""Reference values for the tests of the shipped demo model (models/infera-demo), computed with
Hugging Face tokenizers and transformers on the CPU, in float32 over the model's bf16 weights.

  heldout.txt     held-out text: an excerpt of the first validation document of each corpus source
                  (the model never trained on it), documents ended by <|endoftext|> as in training
  reference.json  its token ids; the logits case (which positions of the first 1024 tokens); a
                  greedy continuation with each step's top-1/top-2 margin; the perplexity over
                  non-overlapping windows of 512 tokens, the method of `infera perplexity`
  logits.f32      float32 logits [positions, vocab] of the logits case

Run from the repository root with tools/train_demo_model/setup_venv.sh's .venv:
  .venv/bin/python tests/data/infera-demo/make_reference.py [--docs build/demo_model/corpus/docs.jsonl]
--docs rebuilds heldout.txt from the corpus (tools/train_demo_model/extract_corpus.py); without
it the committed heldout.txt is used. --perplexity FILE [--context N] only prints transformers'
perplexity of FILE (the README's number for the whole validation split).
"""
import argparse
import hashlib
import json
import math
from pathlib import Path

import numpy as np
import torch
import transformers
from tokenizers import Tokenizer
from transformers import Qwen3ForCausalLM

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
MODEL = ROOT / "models" / "infera-demo"
EXCERPT_BYTES = 3500
LOGITS_PROMPT = 1024
LOGITS_POSITIONS = [0, 255, 511, 767, 1023]
GREEDY_PROMPT, GREEDY_STEPS = 48, 32
PPL_CONTEXT = 512


def heldout_from_docs(docs_path):
    docs = [json.loads(line) for line in open(docs_path, encoding="utf-8")]
    parts, seen = [], set()
    for d in docs:
        if d["split"] != "val" or d["source"] in seen:
            continue
        seen.add(d["source"])
        text = d["text"]
        cut = text.rfind("\n", 0, EXCERPT_BYTES)  # whole lines only
        parts.append(text[:cut if cut > 0 else EXCERPT_BYTES] + "<|endoftext|>")
    return "".join(parts)


@torch.no_grad()
def perplexity(model, ids, context):
    """exp(mean NLL) over non-overlapping windows; each window's first token is not predicted."""
    total, scored = 0.0, 0
    for begin in range(0, len(ids) - 1, context):
        window = torch.tensor([ids[begin:begin + context]])
        if window.shape[1] < 2:
            break
        logits = model(input_ids=window).logits[0, :-1].double()
        nll = torch.nn.functional.cross_entropy(logits, window[0, 1:], reduction="sum")
        total += nll.item()
        scored += window.shape[1] - 1
    return {"context": context, "tokens": len(ids), "scored_tokens": scored,
            "mean_nll": total / scored, "perplexity": math.exp(total / scored)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=Path)
    ap.add_argument("--perplexity", type=Path, help="only print transformers' perplexity of a file")
    ap.add_argument("--context", type=int, default=1024)
    args = ap.parse_args()
    torch.manual_seed(0)
    tok = Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    model = Qwen3ForCausalLM.from_pretrained(MODEL, dtype=torch.float32).eval()

    if args.perplexity:
        ids = tok.encode(args.perplexity.read_text(encoding="utf-8")).ids
        print(json.dumps(perplexity(model, ids, args.context)))
        return

    if args.docs:
        (HERE / "heldout.txt").write_text(heldout_from_docs(args.docs), encoding="utf-8")
    text = (HERE / "heldout.txt").read_text(encoding="utf-8")
    ids = tok.encode(text).ids
    assert len(ids) > LOGITS_PROMPT, f"held-out text has only {len(ids)} tokens"

    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids[:LOGITS_PROMPT]])).logits[0]
    rows = logits[LOGITS_POSITIONS].float().numpy()
    assert np.isfinite(rows).all()
    rows.astype("<f4").tofile(HERE / "logits.f32")

    # Greedy decoding step by step over the cache, recording how decisive each step was.
    prompt = ids[:GREEDY_PROMPT]
    out = model.generate(torch.tensor([prompt]), max_new_tokens=GREEDY_STEPS, do_sample=False,
                         output_scores=True, return_dict_in_generate=True,
                         repetition_penalty=1.0, min_new_tokens=GREEDY_STEPS)
    new_ids = out.sequences[0, len(prompt):].tolist()
    margins = []
    for s in out.scores:
        top2 = torch.topk(s[0].float(), 2).values
        margins.append(float(top2[0] - top2[1]))

    ref = {
        "model": "models/infera-demo",
        "model_sha256": hashlib.sha256((MODEL / "model.safetensors").read_bytes()).hexdigest(),
        "made_with": {"torch": torch.__version__, "transformers": transformers.__version__,
                      "dtype": "float32 compute over the bf16 weights"},
        "heldout_file": "heldout.txt",
        "ids": ids,
        "logits": {"prompt_tokens": LOGITS_PROMPT, "positions": LOGITS_POSITIONS,
                   "file": "logits.f32", "shape": list(rows.shape)},
        "greedy": {"prompt_ids": prompt, "new_ids": new_ids, "step_margins": margins},
        "perplexity": perplexity(model, ids, PPL_CONTEXT),
    }
    (HERE / "reference.json").write_text(json.dumps(ref) + "\n")
    print(f"{len(ids)} held-out tokens; logits {rows.shape}; perplexity "
          f"{ref['perplexity']['perplexity']:.4f} (context {PPL_CONTEXT})")
    print("greedy:", repr(tok.decode(new_ids)))


if __name__ == "__main__":
    main()
