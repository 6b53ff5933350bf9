#!/usr/bin/env python3
"""Trains the demo model's byte-level BPE tokenizer and tokenizes the corpus with it.

The pipeline is Qwen3's, so infera's tokenizer (src/tokenizer) runs it unchanged: NFC normalizer,
Qwen3's Split regex (isolated) then ByteLevel without its own regex, BPE over the 256 byte symbols,
ByteLevel decoder. The special tokens <|endoftext|>, <|im_start|>, <|im_end|> follow the learned
vocabulary, as in Qwen3, so the whole vocabulary is exactly --vocab ids.

Writes <out>/tokenizer.json, <out>/tokenizer_config.json (no chat template: the model is not
taught one), and <out>/{train,val}.u16: the documents of each split as uint16 ids,
each document followed by <|endoftext|>; <out>/{train,val}.txt: the same as text.

Usage: train_tokenizer.py --corpus build/demo_model/corpus --out build/demo_model/tok [--vocab 8192]
"""
import argparse
import json
from pathlib import Path

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

QWEN3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def build_tokenizer():
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False, fuse_unk=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    return tok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, required=True, help="folder with docs.jsonl")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--vocab", type=int, default=8192, help="total ids, special tokens included")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    docs = [json.loads(line) for line in open(args.corpus / "docs.jsonl", encoding="utf-8")]
    train_texts = [d["text"] for d in docs if d["split"] == "train"]

    tok = build_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=args.vocab - len(SPECIALS), min_frequency=2, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(train_texts, trainer=trainer)  # the tokenizer never sees val text
    learned = tok.get_vocab_size()
    if learned != args.vocab - len(SPECIALS):
        raise SystemExit(f"BPE learned {learned} tokens, expected {args.vocab - len(SPECIALS)}")
    tok.add_special_tokens(SPECIALS)
    if tok.get_vocab_size() != args.vocab or tok.token_to_id(SPECIALS[0]) != learned:
        raise SystemExit("special tokens did not land after the learned vocabulary")

    tok.save(str(args.out / "tokenizer.json"))
    # Written by hand rather than by transformers' save_pretrained, whose format differs between
    # transformers 4 and 5; this one loads in both (AutoTokenizer -> PreTrainedTokenizerFast).
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None,
        "eos_token": SPECIALS[0], "pad_token": SPECIALS[0], "unk_token": None,
        "additional_special_tokens": SPECIALS[1:], "model_max_length": 1024,
        "clean_up_tokenization_spaces": False,
    }
    (args.out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")

    eot = tok.token_to_id(SPECIALS[0])
    stats = {}
    for split in ("train", "val"):
        texts = [d["text"] for d in docs if d["split"] == split]
        ids = []
        for enc in tok.encode_batch(texts, add_special_tokens=False):
            ids.extend(enc.ids)
            ids.append(eot)
        arr = np.asarray(ids, dtype=np.uint16)
        assert arr.max() < args.vocab
        arr.tofile(args.out / f"{split}.u16")
        # the same ids as text: `infera perplexity --text-file val.txt` scores exactly these ids
        (args.out / f"{split}.txt").write_text("".join(t + SPECIALS[0] for t in texts),
                                               encoding="utf-8")
        nbytes = sum(len(t.encode("utf-8")) for t in texts)
        stats[split] = {"documents": len(texts), "tokens": len(ids), "text_bytes": nbytes,
                        "bytes_per_token": round(nbytes / len(ids), 3)}
        print(f"{split}: {len(texts)} documents, {nbytes} bytes -> {len(ids)} tokens "
              f"({nbytes / len(ids):.2f} bytes/token)")
    (args.out / "tokens.json").write_text(json.dumps({"vocab": args.vocab, **stats}, indent=2) + "\n")


if __name__ == "__main__":
    main()
