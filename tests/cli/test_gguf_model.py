#!/usr/bin/env python3
"""`--model FILE.gguf` on the commands that load a Qwen3 model: the GGUF files `infera quantize`
writes from the qwen3-micro fixture run like the folder they came from. Expected values are the
fixture's (transformers, f32 over the bf16 weights) and the folder's own output. Standard library
only.

    python3 tests/cli/test_gguf_model.py --infera build/release/infera

Bounds:
  - f32 and bf16 files hold exactly the folder's bf16 weights (f32 = widened, bf16 = same bytes)
    and run through the same kernels: their logits must be bit-identical to the folder's, and
    within the fixture tolerance (1e-4) of transformers.
  - q8_0: each weight is rounded to 1/254 of its 32-block's largest magnitude (plus an f16 scale),
    a relative error of ~0.3% rms per weight. Measured on this 2-layer model: max |logit diff|
    0.53 against logits up to 26.8 (2%). The bound is 5% of max |logit|: a wrong block scale,
    a sign or nibble slip moves logits by tens of percent and fails it.
"""
import json, struct, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nan_safe import max_abs_diff  # noqa: E402
from cli_common import QWEN06, QWEN3_MICRO as MICRO, CliTestCase, infera, main, read_f32, scratch  # noqa: E402
from cli_common import cases as fixture_cases  # noqa: E402

Q8_0_RELATIVE_BOUND = 0.05


def cases():
    return fixture_cases(MICRO)


def gguf(kind):
    """The fixture converted to `kind` once per run (the tokenizer from Qwen3-0.6B's folder)."""
    out = scratch() / f"micro-{kind}.gguf"
    if not out.exists():
        r = infera("quantize", "--model", MICRO, "--tokenizer", QWEN06, "--type", kind, "--out", out)
        assert r.returncode == 0, r.stderr
    return out


def logits(model, ids, name):
    out = scratch() / f"{name}.f32"
    r = infera("logits", "--model", model, "--prompt-ids", ",".join(map(str, ids)),
               "--positions", "all", "--out", out)
    assert r.returncode == 0, r.stderr
    return read_f32(out)


class GgufModel(CliTestCase):
    def test_float_files_give_the_folders_logits(self):
        c = cases()[0]
        want = read_f32(MICRO / c["logits_file"])
        folder = logits(MICRO, c["input_ids"], "folder")
        for kind in ["f32", "bf16"]:
            got = logits(gguf(kind), c["input_ids"], kind)
            self.assertEqual(len(got), len(want), kind)
            self.assertEqual(got.tobytes(), folder.tobytes(), kind)  # bit-identical
            self.assertLess(max_abs_diff(got, want), 1e-4, kind)

    def test_q8_0_logits_within_bound(self):
        c = cases()[0]
        want = read_f32(MICRO / c["logits_file"])
        got = logits(gguf("q8_0"), c["input_ids"], "q8_0")
        scale = max(abs(x) for x in want)
        diff = max_abs_diff(got, want)
        print(f"q8_0: max |logit diff| {diff:.4f} of max |logit| {scale:.2f}", file=sys.stderr)
        self.assertLess(diff, Q8_0_RELATIVE_BOUND * scale)  # inf (NaN, length) fails too
        self.assertGreater(diff, 0.0)  # the file really is quantized

    def test_greedy_ids_and_text_prompt_from_the_files_tokenizer(self):
        c = cases()[1]
        for kind in ["f32", "bf16"]:
            r = infera("run", "--model", gguf(kind), "--prompt-ids", ",".join(map(str, c["input_ids"])),
                       "--greedy", "--max-tokens", len(c["greedy_new_ids"]), "--ignore-eos", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            # bf16 runs bf16 dot products by default (run's precision): case 1's margins are all > 0.3,
            # above bf16 compute's error, so every step still matches.
            self.assertEqual(json.loads(r.stdout)["ids"], c["greedy_new_ids"], kind)
        # No --tokenizer: the text is tokenized by the tokenizer rebuilt from GGUF metadata.
        capital = cases()[0]
        r = infera("run", "--model", gguf("f32"), "--prompt", "The capital of France is", "--raw",
                   "--greedy", "--max-tokens", 3, "--ignore-eos", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(j["prompt_ids"], capital["input_ids"])
        self.assertEqual(len(j["ids"]), 3)

    def test_tokenize_and_detokenize_take_a_file(self):
        # The tokenizer rebuilt from the file's metadata, against the folder it was written from.
        lines = [{"text": "The capital of France is"}, {"text": "<|im_start|>user\nhé 🙂 \t x<|im_end|>"}]
        stdin = "".join(json.dumps(l) + "\n" for l in lines)
        for sub, data in [("tokenize", stdin), ("detokenize", '{"ids": [785, 6722, 151644, 9625]}\n')]:
            a = infera(sub, "--model", gguf("q8_0"), stdin=data)
            b = infera(sub, "--model", QWEN06, stdin=data)
            self.assertEqual(a.returncode, 0, a.stderr)
            self.assertEqual(a.stdout, b.stdout, sub)
            self.assertTrue(a.stdout.strip(), sub)

    def test_perplexity_and_bench_take_a_file(self):
        text = scratch() / "t.txt"
        text.write_text("The capital of France is Paris. " * 8)
        a = infera("perplexity", "--model", gguf("bf16"), "--text-file", text, "--context", 32, "--json")
        b = infera("perplexity", "--model", MICRO, "--tokenizer", QWEN06, "--text-file", text,
                   "--context", 32, "--json")
        self.assertEqual(a.returncode, 0, a.stderr)
        self.assertEqual(b.returncode, 0, b.stderr)
        self.assertEqual(json.loads(a.stdout)["mean_nll"], json.loads(b.stdout)["mean_nll"])

        out = scratch() / "bench.json"
        r = infera("bench", "--model", gguf("q8_0"), "--prefill", 8, "--decode-context", 8,
                   "--decode-steps", 2, "--repeats", 1, "--warmup", 0, "--skip-machine", "--out", out, "-q")
        self.assertEqual(r.returncode, 0, r.stderr)
        res = json.loads(out.read_text())
        self.assertEqual(res["environment"]["weight_format"], "Q8_0")
        # Bytes per decode token = the file's tensors as stored, counted here from the folder's
        # shapes: matrices Q8_0 (34 bytes per 32 weights), vectors F32; tied, so all of them.
        header = (MICRO / "model.safetensors").read_bytes()
        n = struct.unpack("<Q", header[:8])[0]
        meta = json.loads(header[8:8 + n])
        expected = 0
        for name, t in meta.items():
            if name == "__metadata__":
                continue
            count = 1
            for d in t["shape"]:
                count *= d
            expected += count // 32 * 34 if len(t["shape"]) == 2 else 4 * count
        self.assertEqual(res["derived"]["cost_model"]["weight_bytes_per_decode_token"], expected)

    def test_hostile_files_fail_with_a_message_naming_the_file(self):
        data = gguf("f32").read_bytes()
        bad = scratch() / "bad.gguf"
        for content, fragment in [
            (data[:100000], "tokenizer.ggml.tokens"),  # inside the metadata
            (data[: len(data) // 2], "file truncated"),  # inside the tensor data
            (data[:-1000], "runs past"),
            (b"hello world", "not a GGUF file"),
            (b"", "magic"),
            (data[:4] + struct.pack("<I", 1) + data[8:], "version"),
        ]:
            bad.write_bytes(content)
            for cmd in [["run", "--prompt-ids", "1"], ["logits", "--prompt-ids", "1", "--out", scratch() / "x"]]:
                self.assert_one_line_error(infera(cmd[0], "--model", bad, *cmd[1:]), str(bad), fragment)
        self.assert_one_line_error(infera("run", "--model", gguf("f32"), "--dummy-weights", "--prompt-ids", "1"),
                                   "dummy weights")
        self.assert_one_line_error(infera("run", "--model", scratch() / "missing.gguf", "--prompt-ids", "1"),
                                   "missing.gguf", "does not exist")

    def test_quantize_dummy_weights_are_the_dummy_model(self):
        # `quantize --dummy-weights` writes the weights `--dummy-weights` runs (same seed): as bf16
        # (no rounding) the file's logits are the dummy folder model's, bit for bit.
        out = scratch() / "dummy-bf16.gguf"
        r = infera("quantize", "--model", MICRO, "--tokenizer", QWEN06, "--dummy-weights", "--dummy-seed", 7,
                   "--type", "bf16", "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        ids = cases()[0]["input_ids"]
        a = logits(out, ids, "dummy-file")
        b = scratch() / "dummy-folder.f32"
        r = infera("logits", "--model", MICRO, "--dummy-weights", "--dummy-seed", 7, "--prompt-ids",
                   ",".join(map(str, ids)), "--positions", "all", "--out", b)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(a.tobytes(), read_f32(b).tobytes())
        self.assertNotEqual(a.tobytes(), logits(MICRO, ids, "folder").tobytes())

    def test_quantize_refuses_a_gguf_input(self):
        out = scratch() / "again.gguf"
        self.assert_one_line_error(infera("quantize", "--model", gguf("q8_0"), "--type", "q4_0", "--out", out),
                                   "not a file")
        self.assertFalse(out.exists())


if __name__ == "__main__":
    main()
