#!/usr/bin/env python3
"""Writes qwen3_unicode_edge_cases.jsonl: random strings built from characters where regex engines
and Unicode tables tend to disagree (U+180E, U+0085, long s, Kelvin sign, combining marks, jamo,
emoji ZWJ sequences, special tokens...), with the ids Hugging Face `tokenizers` gives for them.
The C++ test (tests/tokenizer/tokenizer_qwen3_test.cpp) must reproduce every id.

Usage: .venv/bin/python tests/data/make_tokenizer_edge_cases.py   (needs `pip install tokenizers`)
"""
import json
import os
import random

from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
POOL = [" ", "\t", "\n", "\r", "\u000b", "\u000c", "\u00a0", "\u3000", "\u2028", "\u0085",
        "\u180e", "\u200b", "\u2066", "\ufeff", "a", "Z", "é", "e\u0301", "ß", "İ", "ſ", "\u212a",
        "'", "'S", "'ll", "'LL", "'Ve", "’s", "1", "٣", "²", "½", "Ⅻ", "世", "界", "😀", "👍🏽",
        "\u200d", "🇫🇷", "한", "\u1100\u1161", "ع", "\u0301", "—", "...", "!!", "<|im_end|>",
        "<think>", "</think>", "<|endoftext|>", "<tool_call>", "<|im_start|", "\x00", "\x1f",
        "\x7f", "_", "-", "$", "{", "}", "  ", "\n\n", " \n ", "\U0001d518", "\U00013000", "ǅ",
        "ﬁ", "Ａ", "ǰ", "\u0345", "Ω"]


def main():
    rng = random.Random(7)
    tok = Tokenizer.from_file(os.path.join(HERE, "..", "..", "..", "shared", "models",
                                           "qwen3-0.6b", "tokenizer.json"))
    out = os.path.join(HERE, "qwen3_unicode_edge_cases.jsonl")
    with open(out, "w", encoding="utf-8") as f:
        for _ in range(1000):
            text = "".join(rng.choice(POOL) for _ in range(rng.randint(1, 25)))
            ids = tok.encode(text, add_special_tokens=False).ids
            f.write(json.dumps({"text": text, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)}) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
