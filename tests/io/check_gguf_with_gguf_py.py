#!/usr/bin/env python3
"""Reads GGUF files that `infera quantize` wrote with the `gguf` package's GGUFReader (llama.cpp's
own Python reader) and checks them against the Hugging Face folder they came from, using only
gguf, numpy and the folder's JSON/safetensors (never our code):

  - metadata: architecture, every qwen3.* hyper-parameter equal to config.json, tokenizer tokens,
    token types, merges and special ids equal to tokenizer.json / tokenizer_config.json;
  - tensors: every Hugging Face tensor present under llama.cpp's name, GGUF shape = reversed HF
    shape, the type llama.cpp's rule gives (restated here), and the data:
      F32 / F16 / BF16 / Q8_0 / Q4_0: byte-identical to gguf.quants.quantize(source);
      Q4_K / Q6_K (gguf has no quantizer): gguf.quants.dequantize(data) within 4-bit / 6-bit
      error of the source: relative rms below 0.085 / 0.02 per tensor. For Gaussian weights a
      32-value sub-block spans ~4.2 sigma in 15 steps (Q4_K) and a 16-value group ~1.8 sigma in
      31.5 steps (Q6_K); uniform rounding noise step/sqrt(12) gives 0.081 / 0.016, which the
      scale search only lowers (measured 0.071 / 0.0177, the latter with int8 group scales).

The fixture's rows (32 wide) are too short for Q4_K/Q6_K blocks, so the same checks also run on a
synthetic Qwen3 folder this script writes (rows of 256 and 512, 8 layers, untied output, a small
byte-level tokenizer), which reaches every type and llama.cpp's per-layer Q4_K_M rule.

Usage: check_gguf_with_gguf_py.py --infera BIN --model HF_DIR --tokenizer DIR --out-dir DIR
Exit status 0 when every check passes; each failure is printed.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, quants

LAYER = {
    "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
    "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
GLOBAL = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
BASE = {"f32": T.F32, "f16": T.F16, "bf16": T.BF16, "q8_0": T.Q8_0, "q4_0": T.Q4_0,
        "q4_k_m": T.Q4_K}
BLOCK = {T.F32: 1, T.F16: 1, T.BF16: 1, T.Q8_0: 32, T.Q4_0: 32, T.Q4_K: 256, T.Q6_K: 256}

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def hf_name(gguf_name):
    base = gguf_name.removesuffix(".weight")
    if base in GLOBAL:
        return GLOBAL[base] + ".weight"
    _, layer, part = base.split(".", 2)
    return f"model.layers.{layer}.{LAYER[part]}.weight"


def read_safetensors(path):
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        buf = raw[8 + n + b:8 + n + end]
        if e["dtype"] == "BF16":
            a = (np.frombuffer(buf, np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif e["dtype"] == "F16":
            a = np.frombuffer(buf, np.float16).astype(np.float32)
        else:
            a = np.frombuffer(buf, np.float32)
        out[name] = a.reshape(e["shape"])
    return out


def use_more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def expected_type(kind, name, shape, layers, tied):
    """llama.cpp's llama_tensor_get_type for these file types (no imatrix), with the fallback
    documented in src/io/gguf_convert.h."""
    if len(shape) < 2:
        return T.F32
    t = BASE[kind]
    is_output = name == "output.weight" or (tied and name == "token_embd.weight")
    if kind in ("q4_0", "q4_k_m") and is_output:
        t = T.Q6_K
    if kind == "q4_k_m" and (".attn_v." in name or ".ffn_down." in name):
        if use_more_bits(int(name.split(".")[1]), layers):
            t = T.Q6_K
    k = shape[-1]
    if k % BLOCK[t]:
        t = T.Q8_0 if t in (T.Q4_K, T.Q6_K) else t
    if k % BLOCK[t]:
        t = T.F16
    return t


def field_value(reader, key):
    f = reader.get_field(key)
    return None if f is None else f.contents()


def check_file(path, kind, model_dir, tok_dir):
    config = json.loads((model_dir / "config.json").read_text())
    tok = json.loads((tok_dir / "tokenizer.json").read_text())
    tok_cfg_path = tok_dir / "tokenizer_config.json"
    tok_cfg = json.loads(tok_cfg_path.read_text()) if tok_cfg_path.exists() else {}
    reader = GGUFReader(path)
    v = lambda k: field_value(reader, k)  # noqa: E731
    check(v("general.architecture") == "qwen3", f"{path}: architecture {v('general.architecture')}")
    heads = config["num_attention_heads"]
    expect = {
        "qwen3.block_count": config["num_hidden_layers"],
        "qwen3.embedding_length": config["hidden_size"],
        "qwen3.feed_forward_length": config["intermediate_size"],
        "qwen3.attention.head_count": heads,
        "qwen3.attention.head_count_kv": config.get("num_key_value_heads", heads),
        "qwen3.attention.key_length": config.get("head_dim", config["hidden_size"] // heads),
        "qwen3.context_length": config.get("max_position_embeddings"),
    }
    for key, want in expect.items():
        check(v(key) == want, f"{path}: {key} = {v(key)}, want {want}")
    theta = config.get("rope_theta") or config.get("rope_parameters", {}).get("rope_theta")
    check(np.isclose(v("qwen3.rope.freq_base"), theta), f"{path}: rope.freq_base")
    check(np.isclose(v("qwen3.attention.layer_norm_rms_epsilon"), config["rms_norm_eps"]),
          f"{path}: rms eps")

    # Tokenizer: ids and texts as tokenizer.json has them, padding up to the embedding rows.
    tokens, types = v("tokenizer.ggml.tokens"), v("tokenizer.ggml.token_type")
    vocab = config["vocab_size"]
    check(len(tokens) == vocab and len(types) == vocab, f"{path}: {len(tokens)} tokens")
    want_tokens = {i: t for t, i in tok["model"]["vocab"].items()}
    for a in tok["added_tokens"]:
        want_tokens[a["id"]] = a["content"]
    bad = [i for i in range(vocab) if tokens[i] != want_tokens.get(i, f"[PAD{i}]")]
    check(not bad, f"{path}: tokens differ at ids {bad[:5]}")
    added = {a["id"] for a in tok["added_tokens"]}
    bad = [i for i in range(vocab) if types[i] != (5 if i not in want_tokens else 1 if i not in added else types[i])]
    check(not bad, f"{path}: token types differ at {bad[:5]}")
    check(all(types[a["id"]] == 3 for a in tok["added_tokens"] if a["special"]),
          f"{path}: special added tokens are not control tokens")
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    check(v("tokenizer.ggml.merges") == merges, f"{path}: merges differ")
    check(v("tokenizer.ggml.model") == "gpt2" and v("tokenizer.ggml.pre") == "qwen2",
          f"{path}: tokenizer model/pre")
    if tok_cfg.get("eos_token"):
        ids = {a["content"]: a["id"] for a in tok["added_tokens"]}
        check(v("tokenizer.ggml.eos_token_id") == ids[tok_cfg["eos_token"]], f"{path}: eos id")
    if "chat_template" in tok_cfg:
        check(v("tokenizer.chat_template") == tok_cfg["chat_template"], f"{path}: chat template")

    # Tensors.
    source = read_safetensors(model_dir / "model.safetensors")
    tied = "lm_head.weight" not in source
    seen = set()
    layers = config["num_hidden_layers"]
    for t in reader.tensors:
        name = t.name
        hf = hf_name(name)
        seen.add(hf)
        src = np.ascontiguousarray(source[hf], dtype=np.float32)
        shape = list(reversed([int(d) for d in t.shape]))
        check(shape == list(src.shape), f"{path}: {name} shape {shape} vs {list(src.shape)}")
        want_type = expected_type(kind, name, shape, layers, tied)
        check(t.tensor_type == want_type,
              f"{path}: {name} type {t.tensor_type.name}, want {want_type.name}")
        data = np.asarray(t.data).view(np.uint8).reshape(-1)
        if t.tensor_type in (T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0):
            want = np.asarray(quants.quantize(src, t.tensor_type)).view(np.uint8).reshape(-1)
            check(data.tobytes() == want.tobytes(), f"{path}: {name} bytes differ from gguf.quants")
        else:
            back = quants.dequantize(data, t.tensor_type).reshape(src.shape)
            rel = np.sqrt(np.mean((back - src) ** 2) / np.mean(src ** 2))
            limit = 0.085 if t.tensor_type == T.Q4_K else 0.02
            check(rel < limit, f"{path}: {name} relative rms error {rel:.4f} >= {limit}")
    check(seen == set(source), f"{path}: tensors missing: {set(source) - seen}")


def write_synthetic_model(folder):
    """A small untied Qwen3 with K-quant-sized rows, random bf16 weights, its own tokenizer."""
    rng = np.random.default_rng(7)
    folder.mkdir(parents=True, exist_ok=True)
    hidden, inter, layers, heads, kv, head_dim, vocab = 256, 512, 8, 4, 2, 64, 320
    config = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": hidden,
              "intermediate_size": inter, "num_hidden_layers": layers,
              "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": head_dim,
              "vocab_size": vocab, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
              "rope_theta": 1000000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
              "bos_token_id": 256}
    (folder / "config.json").write_text(json.dumps(config))
    shapes = {"model.embed_tokens.weight": [vocab, hidden], "model.norm.weight": [hidden],
              "lm_head.weight": [vocab, hidden]}
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": [hidden],
                       p + "post_attention_layernorm.weight": [hidden],
                       p + "self_attn.q_proj.weight": [heads * head_dim, hidden],
                       p + "self_attn.k_proj.weight": [kv * head_dim, hidden],
                       p + "self_attn.v_proj.weight": [kv * head_dim, hidden],
                       p + "self_attn.o_proj.weight": [hidden, heads * head_dim],
                       p + "self_attn.q_norm.weight": [head_dim],
                       p + "self_attn.k_norm.weight": [head_dim],
                       p + "mlp.gate_proj.weight": [inter, hidden],
                       p + "mlp.up_proj.weight": [inter, hidden],
                       p + "mlp.down_proj.weight": [hidden, inter]})
    header, blobs, offset = {}, [], 0
    for name, shape in shapes.items():
        values = rng.standard_normal(shape).astype(np.float32) * np.float32(0.05)
        bits = values.view(np.uint32)
        bf16 = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16).tobytes()
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + len(bf16)]}
        blobs.append(bf16)
        offset += len(bf16)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    (folder / "model.safetensors").write_bytes(len(text).to_bytes(8, "little") + text + b"".join(blobs))
    # Byte-level alphabet (GPT-2's byte -> unicode map), two merges, two added tokens.
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    vocab_map = {chr(c): b for b, c in zip(bs, cs)}
    vocab_map["ab"] = 258
    vocab_map["abc"] = 259
    tok = {"version": "1.0", "added_tokens": [
        {"id": 256, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": True},
        {"id": 257, "content": "<think>", "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": False}],
        "model": {"type": "BPE", "vocab": vocab_map, "merges": [["a", "b"], ["ab", "c"]]}}
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"eos_token": "<|endoftext|>", "chat_template": "{{ messages }}"}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--infera", required=True)
    p.add_argument("--model", required=True, type=pathlib.Path,
                   help="fixture folder, relative to the shared folder")
    p.add_argument("--tokenizer", required=True, type=pathlib.Path,
                   help="tokenizer folder, relative to the shared folder")
    p.add_argument("--shared-default", required=True, type=pathlib.Path,
                   help="the shared folder when $INFERA_SHARED_DIR is not set")
    p.add_argument("--out-dir", required=True, type=pathlib.Path)
    args = p.parse_args()
    shared = pathlib.Path(os.environ.get("INFERA_SHARED_DIR") or args.shared_default)
    args.model, args.tokenizer = shared / args.model, shared / args.tokenizer
    args.out_dir.mkdir(parents=True, exist_ok=True)
    synthetic = args.out_dir / "qwen3-synthetic-k"
    write_synthetic_model(synthetic)
    # GGUFReader takes ~10 s per fixture file (its 151,936-entry token lists), so the fixture runs
    # the types the loader tests use and the fallback-heavy q4_k_m; the small synthetic model runs all.
    runs = ((args.model, args.tokenizer, ("bf16", "q8_0", "q4_k_m")),
            (synthetic, synthetic, ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_k_m")))
    for model, tok_dir, kinds in runs:
        for kind in kinds:
            out = args.out_dir / f"{model.name}-{kind}.gguf"
            subprocess.run([args.infera, "quantize", "--model", str(model), "--tokenizer",
                            str(tok_dir), "--type", kind, "--out", str(out)], check=True,
                           stderr=subprocess.DEVNULL)
            check_file(out, kind, model, tok_dir)
            print(f"checked {out.name}")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
