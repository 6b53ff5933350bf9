#!/usr/bin/env python3
"""Writes the seed corpora in tests/fuzz/corpus/<target>/ (small files, committed). Run again after
changing a seed; libFuzzer grows its own working corpus from these under build/fuzz/corpus/.

Usage: python3 tests/fuzz/make_seeds.py
"""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def safetensors(tensors, metadata=None, pad_to=8):
    """tensors: list of (name, dtype, shape, raw bytes), laid out back to back."""
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad_to:
        text += b" " * (-len(text) % pad_to)
    return struct.pack("<Q", len(text)) + text + data


def f32(*values):
    return struct.pack("<%df" % len(values), *values)


SMALL = [("model.norm.weight", "F32", [2, 3], f32(1, 2, 3, 4, 5, 6)),
         ("model.embed_tokens.weight", "BF16", [4, 2], b"\x80\x3f" * 8),
         ("h", "F16", [3], b"\x00\x3c" * 3),
         ("i", "I32", [1], struct.pack("<i", -7))]


def seeds():
    s = {}
    s["fuzz_safetensors"] = {
        "small": safetensors(SMALL, {"format": "pt"}),
        "unpadded": safetensors(SMALL[:2], pad_to=0),  # misaligned data: the aligned-copy path
        "empty_tensor": safetensors([("e", "F32", [0, 4], b""), ("s", "F32", [], f32(1))]),
        "empty_header": safetensors([]),
    }
    index = {"metadata": {"total_size": 40},
             "weight_map": {"model.norm.weight": "a.safetensors", "h": "b.safetensors",
                            "model.embed_tokens.weight": "a.safetensors"}}
    s["fuzz_weight_folder"] = {
        "sharded": json.dumps(index).encode() + b"\n--8<--\n" + safetensors(SMALL[:2]) +
        b"\n--8<--\n" + safetensors(SMALL[2:3]),
        "single": safetensors(SMALL),
    }
    qwen_v4 = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936,
               "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
               "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
               "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
               "rope_scaling": None, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}
    qwen_v5 = dict(qwen_v4, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                   dtype="bfloat16")
    del qwen_v5["rope_theta"], qwen_v5["torch_dtype"], qwen_v5["rope_scaling"]
    modernbert = {"model_type": "modernbert", "global_attn_every_n_layers": 3, "local_attention": 128,
                  "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 160000.0},
                                      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}}
    generation = {"bos_token_id": 151643, "do_sample": True, "eos_token_id": [151645, 151643],
                  "pad_token_id": 151643, "temperature": 0.6, "top_k": 20, "top_p": 0.95,
                  "min_p": 0.0, "repetition_penalty": 1.05, "max_new_tokens": 512}
    s["fuzz_hf_config"] = {name: json.dumps(v, indent=2).encode() for name, v in
                           [("qwen3_v4", qwen_v4), ("qwen3_v5", qwen_v5), ("modernbert_v5", modernbert),
                            ("generation", generation)]}
    tiny = {
        "version": "1.0",
        "added_tokens": [
            {"id": 12, "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True},
            {"id": 13, "content": "[L]", "single_word": False, "lstrip": True, "rstrip": False, "normalized": False, "special": False},
            {"id": 14, "content": "[R]", "single_word": False, "lstrip": False, "rstrip": True, "normalized": True, "special": False},
            {"id": 15, "content": "[W]", "single_word": True, "lstrip": False, "rstrip": False, "normalized": False, "special": False}],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\s+|\\p{L}+|\\p{N}|[^\\s\\p{L}\\p{N}]+"}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {"a": 0, "b": 1, "c": 2, "Ġ": 3, "ab": 4, "abc": 5, "ĠĠ": 6, "x": 7, "[": 8, "]": 9,
                            "1": 10, "2": 11},
                  "merges": ["a b", ["ab", "c"], "Ġ Ġ"]}}
    plain = {"normalizer": {"type": "NFKC"},
             "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "Removed", "invert": False},
             "decoder": None,
             "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True,
                       "ignore_merges": True,
                       "vocab": {"<unk>": 0, "<0x41>": 1, "<0xC3>": 2, "<0xA9>": 3, "h": 4, "i": 5, "hi": 6},
                       "merges": ["h i"]},
             "added_tokens": [{"id": 7, "content": "<|x|>", "special": True}]}
    text = "\n--text--\n".encode()
    s["fuzz_tokenizer_json"] = {
        "tiny": json.dumps(tiny, ensure_ascii=False).encode() + text + "ab abc [L] x <s>12 [W]".encode(),
        "plain": json.dumps(plain).encode() + text + "hi Aé hi<|x|>".encode(),
    }
    s["fuzz_tokenizer_text"] = {
        "ascii": b"\x00The capital of France is Paris.\n\n  def f(x):\treturn x ** 2",
        "special": "\x00<|im_start|>user\nWhy?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n".encode(),
        "unicode": "\x00héllo 👋 世界 Ελληνικά café e\u0301 ﬁ ① ٣ \u200d\u00a0".encode(),
        "ids": b"\x01" + b"".join(struct.pack("<I", i)[:3] for i in [785, 6722, 315, 9625, 374, 151645, 99, 100]),
        "split_char": b"\x01" + b"".join(struct.pack("<I", i)[:3] for i in [145, 247, 233]),
    }
    tool = json.dumps({"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "maximum": 18446744073709551616}},
        "required": ["city"]}}})
    rec = lambda kind, *fields: bytes([kind]) + "\x1f".join(fields).encode()
    s["fuzz_chat_template"] = {
        "conversation": b"\x1e".join([rec(0, "You are helpful."), rec(1, "What is 2+2?"),
                                      rec(2, "<think>\nadd\n</think>\n\n4"), rec(1, "thanks")]),
        "tools": b"\x1e".join([rec(7, tool), rec(1, "Weather in Paris?"), rec(2, ""),
                               rec(5, "get_weather", '{"city": "Paris", "days": 3, "x": [1.5, 1e16, null, true]}'),
                               rec(3, '{"temp": 21}'), rec(3, "sunny"), rec(2, "It is sunny.", "checked")]),
        "json": json.dumps({"a": [1, -2.5e-7, 1e15, "é\n", {"b": None}], "n": 123456789012345678901234567890}).encode(),
    }
    s["fuzz_cli_jsonl"] = {
        "lines": b'{"text": "The capital of France is"}\n\n{"ids": [785, 6722, 315, 9625, 374]}\n'
                 b'{"text": "<|im_end|>ok"}\n{"ids": [151645, 562, -1, 99999999]}\n {"text": broken\n',
    }
    return s


def main():
    for target, files in seeds().items():
        folder = os.path.join(HERE, "corpus", target)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        for name, data in files.items():
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
