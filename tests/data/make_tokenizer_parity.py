#!/usr/bin/env python3
"""Builds small tokenizer.json files of the kinds the encoders use, with Hugging Face `tokenizers`
itself, and records what that library gives for a few hundred varied texts. The C++ tests
(tests/tokenizer/tokenizer_parity_test.cpp) must reproduce every id, type id and decoded string.

Files written to tests/data/tokenizer_parity/:
  <name>.json           a tokenizer trained here on a small multilingual text (each < 200 KB)
  <name>.cases.jsonl    per text: ids without / with special tokens, pairs with type ids, decodes;
                        then decodes of random id lists (ids past the vocab, byte tokens out of order)
  qwen3_unknown_ids.jsonl   decode of Qwen3 ids mixed with its embedding's pad rows (151669..151935)
  unicode_props.json    the character classes tokenizers' BERT pieces and Lowercase use, per code point

Usage: scripts/setup_reference_venv.sh && .venv/bin/python tests/data/make_tokenizer_parity.py
"""
import json
import os
import random

import tokenizers
from tokenizers import (Tokenizer, decoders, models, normalizers, pre_tokenizers, processors,
                        trainers)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "tokenizer_parity")
SHARED = os.environ.get("INFERA_SHARED_DIR", os.path.join(HERE, "..", "..", "..", "shared"))

CORPUS = """The quick brown fox jumps over the lazy dog. Don't panic, it's only a test!
ModernBERT is an encoder; it reads text in both directions and doesn't generate.
Tokenizers split words into pieces: "unbelievable" becomes un ##believ ##able.
In 2024, 37 models were trained on 1.5 trillion tokens (roughly 3,000 GPU-days).
def encode(text): return [vocab[t] for t in text.split()]  # a line of code
Le renard brun rapide saute par-dessus le chien paresseux. Ça va très bien, merci.
Der schnelle braune Fuchs springt über den faulen Hund. Straße, Größe, Mädchen.
El rápido zorro marrón salta sobre el perro perezoso. ¿Dónde está la biblioteca?
Быстрая коричневая лиса прыгает через ленивую собаку. Привет, как дела?
Η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο.
敏捷的棕色狐狸跳过了懒狗。我们今天去图书馆学习。
素早い茶色の狐がのろまな犬を飛び越える。東京は日本の首都です。
빠른 갈색 여우가 게으른 개를 뛰어넘는다. 안녕하세요, 반갑습니다.
الثعلب البني السريع يقفز فوق الكلب الكسول. مرحبا بالعالم.
तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है। नमस्ते दुनिया।
สุนัขจิ้งจอกสีน้ำตาลกระโดดข้ามสุนัขขี้เกียจ
Hello world! Hello again, world. The world says hello back.
Encoders and decoders share attention, embeddings, and layer norms.
A sentence with    several   spaces, tabs\tand
newlines.
Emoji are text too: 😀 👍🏽 🇫🇷 ❤️ 👩‍💻 — and so are dashes – and quotes “like these”.
"""

POOL = [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2028", "\u200b", "\ufeff", "\u180e",
        "\u2581", "\u2581\u2581", "a", "Z", "é", "e\u0301", "ß", "İ", "ſ", "\u212a", "ǅ", "ﬁ", "Ａ",
        "the", "The", "THE", "quick", "jumps", "unbelievable", "don't", "n't", "it's", "I'm",
        "we've", "they're", "do not", " .", " ,", " ?", " !", " ' ", "...", "!!", "?", "(", ")",
        "\"", "'", "-", "_", "$", "{", "}", "#", "##", "##able", "1", "42", "3.14", "٣", "²", "½",
        "世", "界", "学习", "東京", "한", "안녕", "\u1100\u1161", "ع", "مرحبا", "नमस्ते", "สุนัข",
        "Привет", "Größe", "Ça", "😀", "👍🏽", "🇫🇷", "👩‍💻", "\u200d", "🦜", "\U0001d518",
        "\U00013000", "\x00", "\x01", "\x1f", "\x7f", "\u0085", "\ufffd", "\u0301", "\u0345",
        "[CLS]", "[SEP]", "[MASK]", "[UNK]", "[PAD]", "<s>", "</s>", "<mask>", "<pad>", "<unk>",
        "<bos>", "<eos>", "<start_of_turn>", "<0x41>", "<0xE2>", "<|padding|>",
        "x" * 30, "supercalifragilistic", "Tokenizers", "ModernBERT"]

FIXED = ["", " ", "  ", "\n", "Hello world!", " Hello world!", "Hello  world ", "hello\tworld\n",
         "The quick brown fox jumps over the lazy dog.", "Don't panic, it's only a test!",
         "[CLS] hello [SEP] world [SEP]", "a[MASK]b", "a [MASK] b", "<s>hello</s>", " <s> x",
         "<mask> is here", "▁leading meta", "already▁has▁meta", "trailing space ",
         "emoji 😀👍🏽🇫🇷👩‍💻🦜 end", "混合 text 和 中文", "東京は日本の首都です。",
         "Ça va très bien, merci.", "e\u0301e\u0301 cafe\u0301 İstanbul ǅ ﬁ Ａ",
         "\x00\x01 control \x7f chars\u200b\ufeff", "\ufffd replacement", "<0x41><0x42>",
         "x" * 300, " " * 40, "\n\n\n", "a" + "\u0301" * 10, "😀" * 20,
         "supercalifragilisticexpialidocious", "def encode(text): return text.split()"]

SPECIALS = {
    "bert": ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
    "roberta": ["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    "modernbert": ["|||IP_ADDRESS|||", "<|padding|>", "[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"],
    "gemma": ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>"],
    "llama": ["<unk>", "<s>", "</s>"],
}


def texts():
    rng = random.Random(9)
    out = list(FIXED)
    while len(out) < 260:
        out.append("".join(rng.choice(POOL) for _ in range(rng.randint(1, 14))))
    return out


def corpus_lines():
    return [l for l in CORPUS.splitlines() if l] * 3


def add_byte_tokens(tok, missing=()):
    """Gemma/Llama files hold <0x00>..<0xFF> in the model vocab (not as added tokens). Bytes in
    `missing` are left out, so that characters needing them fall back to the unk token."""
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    nxt = max(vocab.values()) + 1 + len(j["added_tokens"])
    for b in range(256):
        name = "<0x%02X>" % b
        if name not in vocab and b not in missing:
            vocab[name] = nxt
            nxt += 1
    vocab["<0x+A>"] = nxt  # Rust's u8::from_str_radix accepts a '+': ByteFallback reads it as 0x0A
    return Tokenizer.from_str(json.dumps(j))


def template(cls, sep, pair_cls=None):
    single = f"{cls} $A:0 {sep}:0" if cls else f"$A:0 {sep}:0"
    pair = f"{single} {pair_cls + ':1 ' if pair_cls else ''}$B:1 {sep}:1"
    return single, pair


def wordpiece_bert():
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(corpus_lines(), trainers.WordPieceTrainer(
        vocab_size=700, special_tokens=SPECIALS["bert"], limit_alphabet=120))
    single, pair = template("[CLS]", "[SEP]")
    ids = {t: tok.token_to_id(t) for t in ("[CLS]", "[SEP]")}
    tok.post_processor = processors.TemplateProcessing(single=single, pair=pair,
                                                       special_tokens=list(ids.items()))
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    return tok


def wordpiece_cased():
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=12))
    tok.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False,
                                                handle_chinese_chars=True, clean_text=True)
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus_lines(), trainers.WordPieceTrainer(
        vocab_size=600, special_tokens=SPECIALS["bert"], limit_alphabet=150))
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    return tok


def bytelevel_modernbert():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.train_from_iterator(corpus_lines(), trainers.BpeTrainer(
        vocab_size=700, special_tokens=SPECIALS["modernbert"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokens = [tokenizers.AddedToken("[MASK]", lstrip=True, special=True, normalized=False),
              tokenizers.AddedToken("   ", special=False, normalized=True)]
    tok.add_tokens(tokens)
    single, pair = template("[CLS]", "[SEP]")
    ids = {t: tok.token_to_id(t) for t in ("[CLS]", "[SEP]")}
    tok.post_processor = processors.TemplateProcessing(single=single, pair=pair,
                                                       special_tokens=list(ids.items()))
    tok.decoder = decoders.ByteLevel()
    return tok


def bytelevel_roberta():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.train_from_iterator(corpus_lines(), trainers.BpeTrainer(
        vocab_size=600, special_tokens=SPECIALS["roberta"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.add_special_tokens([tokenizers.AddedToken("<mask>", lstrip=True, special=True)])
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                                      ("<s>", tok.token_to_id("<s>")))
    tok.decoder = decoders.ByteLevel()
    return tok


def bytefallback_gemma():
    """mmBERT's shape (Gemma's tokenizer): spaces become U+2581 in the normalizer, no
    pre-tokenizer, BPE with byte fallback, decoder Replace + ByteFallback + Fuse."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.train_from_iterator(corpus_lines(), trainers.BpeTrainer(
        vocab_size=700, special_tokens=SPECIALS["gemma"], limit_alphabet=70))
    tok.add_tokens([tokenizers.AddedToken("\n\n", normalized=False)])
    tok = add_byte_tokens(tok)
    single, pair = template("<bos>", "<eos>")
    ids = {t: tok.token_to_id(t) for t in ("<bos>", "<eos>")}
    tok.post_processor = processors.TemplateProcessing(single=single, pair=pair,
                                                       special_tokens=list(ids.items()))
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse()])
    return tok


def metaspace_llama():
    """Llama 2 (non-legacy) shape: Metaspace with prepend_scheme 'first' and no split."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first",
                                                 split=False)
    tok.train_from_iterator(corpus_lines(), trainers.BpeTrainer(
        vocab_size=600, special_tokens=SPECIALS["llama"], limit_alphabet=60))
    tok = add_byte_tokens(tok)
    ids = {t: tok.token_to_id(t) for t in ("<s>", "</s>")}
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A:0", pair="<s> $A:0 <s>:1 $B:1", special_tokens=list(ids.items()))
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    return tok


def metaspace_split():
    """T5-like Metaspace (split, prepend always) with plain unk handling (no byte fallback)."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=False))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(),
                                           normalizers.Replace(tokenizers.Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always",
                                                 split=True)
    tok.train_from_iterator(corpus_lines(), trainers.BpeTrainer(
        vocab_size=500, special_tokens=SPECIALS["llama"], limit_alphabet=50))
    tok.post_processor = processors.TemplateProcessing(
        single="$A:0 </s>:0", pair="$A:0 </s>:0 $B:1 </s>:1",
        special_tokens=[("</s>", tok.token_to_id("</s>"))])
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    return tok


def legacy_prepend():
    """Llama legacy shape: Prepend + Replace normalizers, decoder ... + Strip; with a Strip
    normalizer in front and a Metaspace decoder that never prepends, for coverage."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Strip(left=False, right=True),
                                           normalizers.Prepend("\u2581"),
                                           normalizers.Replace(" ", "\u2581")])
    tok.train_from_iterator(corpus_lines(), trainers.BpeTrainer(
        vocab_size=500, special_tokens=SPECIALS["llama"], limit_alphabet=60))
    # No lead bytes of 3-byte sequences: CJK, Hindi, Thai... become <unk> (fused), mixed with
    # byte-fallback characters, where tokenizers holds an unk back past byte tokens.
    tok = add_byte_tokens(tok, missing=range(0xE0, 0xF0))
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<s> $A:0", pair="<s> $A:0 <s>:1 $B:1",
                                      special_tokens=[("<s>", tok.token_to_id("<s>"))])])
    tok.decoder = decoders.Sequence([decoders.ByteFallback(),
                                     decoders.Metaspace(replacement="\u2581",
                                                        prepend_scheme="never"),
                                     decoders.Fuse(), decoders.Strip(" ", 0, 1)])
    return tok


BUILDERS = {
    "wordpiece_bert": wordpiece_bert,
    "wordpiece_cased": wordpiece_cased,
    "bytelevel_modernbert": bytelevel_modernbert,
    "bytelevel_roberta": bytelevel_roberta,
    "bytefallback_gemma": bytefallback_gemma,
    "metaspace_llama": metaspace_llama,
    "metaspace_split": metaspace_split,
    "legacy_prepend": legacy_prepend,
}


def decodes(tok, ids):
    """Both decodes, or None where tokenizers panics (its Strip decoder with stop > 0 indexes
    past an empty string); such cases are left out."""
    try:
        return {"decoded": tok.decode(ids, skip_special_tokens=False),
                "decoded_skip": tok.decode(ids, skip_special_tokens=True)}
    except BaseException as e:  # pyo3's PanicException derives from BaseException
        if type(e).__name__ != "PanicException":
            raise
        return None


def record(name, tok):
    path = os.path.join(OUT, name + ".json")
    tok.save(path)
    tok = Tokenizer.from_file(path)  # what the C++ side reads, reloaded
    size = os.path.getsize(path)
    assert size < 200_000, (name, size)
    rng = random.Random(name)
    items = texts()
    vocab = tok.get_vocab_size(with_added_tokens=True)
    n = 0
    with open(os.path.join(OUT, name + ".cases.jsonl"), "w", encoding="utf-8") as f:
        for i, text in enumerate(items):
            plain = tok.encode(text, add_special_tokens=False).ids
            special = tok.encode(text).ids
            case = {"text": text, "ids": plain, "ids_special": special}
            case.update(decodes(tok, special) or {})
            if i % 3 == 0:
                pair = items[(i * 7 + 1) % len(items)]
                e = tok.encode(text, pair)
                e0 = tok.encode(text, pair, add_special_tokens=False)
                case.update({"pair": pair, "pair_ids": e.ids, "pair_type_ids": e.type_ids,
                             "pair_ids_plain": e0.ids, "pair_type_ids_plain": e0.type_ids})
            f.write(json.dumps(case, ensure_ascii=False) + "\n")
            n += 1
        for _ in range(60):
            ids = [rng.randrange(0, vocab + 20) for _ in range(rng.randint(0, 12))]
            d = decodes(tok, ids)
            if d is None:
                continue
            f.write(json.dumps({"decode_ids": ids, **d}, ensure_ascii=False) + "\n")
            n += 1
    print(f"{name}: {size} bytes, {n} cases")


def qwen3_unknown_ids():
    tok = Tokenizer.from_file(os.path.join(SHARED, "models", "qwen3-0.6b", "tokenizer.json"))
    rng = random.Random(6)
    known = tok.encode("The capital of France is Paris. 😀 ok").ids
    cases = [[785, 151669, 6722], [151935], [151669, 151700, 151935], known + [151800],
             [151645, 151671, 562]]
    for _ in range(20):
        ids = list(known)
        for _ in range(rng.randint(1, 4)):
            ids.insert(rng.randrange(len(ids) + 1), rng.randrange(151669, 151936))
        cases.append(ids)
    with open(os.path.join(OUT, "qwen3_unknown_ids.jsonl"), "w", encoding="utf-8") as f:
        for ids in cases:
            f.write(json.dumps({"decode_ids": ids,
                                "decoded": tok.decode(ids, skip_special_tokens=False),
                                "decoded_skip": tok.decode(ids, skip_special_tokens=True)},
                               ensure_ascii=False) + "\n")
    print("qwen3_unknown_ids:", len(cases), "cases")


def unicode_props():
    """Per code point, how tokenizers classifies it (probed through the library's own pieces)."""
    clean = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False,
                                       strip_accents=False, lowercase=False)
    strip = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False,
                                       strip_accents=True, lowercase=False)
    nfd, low = normalizers.NFD(), normalizers.Lowercase()
    bert = pre_tokenizers.BertPreTokenizer()
    removed, punct, mark, lower = [], [], [], []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        if clean.normalize_str(c) == "":
            removed.append(cp)
        if len(bert.pre_tokenize_str("a" + c + "b")) == 3:
            punct.append(cp)
        if nfd.normalize_str(c) == c and strip.normalize_str(c) == "":
            mark.append(cp)
        lc = low.normalize_str(c)
        if lc != c:
            lower.append([cp, [ord(x) for x in lc]])

    def ranges(xs):
        out = []
        for x in xs:
            if out and out[-1][1] == x - 1:
                out[-1][1] = x
            else:
                out.append([x, x])
        return out

    nfd_stable_marks_note = "mark: only code points that NFD leaves unchanged"
    with open(os.path.join(OUT, "unicode_props.json"), "w") as f:
        json.dump({"note": nfd_stable_marks_note, "control_removed": ranges(removed),
                   "punctuation": ranges(punct), "nonspacing_mark": ranges(mark),
                   "nfd_unstable": ranges([cp for cp in range(0x110000)
                                           if not 0xD800 <= cp <= 0xDFFF
                                           and nfd.normalize_str(chr(cp)) != chr(cp)]),
                   "lowercase": lower}, f, separators=(",", ":"))
    print("unicode_props: written")


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, build in BUILDERS.items():
        record(name, build())
    qwen3_unknown_ids()
    unicode_props()
    with open(os.path.join(OUT, "VERSION"), "w") as f:
        f.write(f"tokenizers {tokenizers.__version__}\n")


if __name__ == "__main__":
    main()
