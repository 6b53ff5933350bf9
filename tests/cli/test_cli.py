#!/usr/bin/env python3
"""End-to-end checks of the `infera` binary: exit codes, one-line errors, and outputs equal to
the transformers reference fixtures. Standard library only.

    python3 tests/cli/test_cli.py --infera build/release/infera
"""
import array, json, os, subprocess, sys, tempfile, unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nan_safe import max_abs_diff  # noqa: E402

INFERA = None
SHARED = Path(os.environ.get("INFERA_SHARED_DIR") or Path(__file__).resolve().parents[2].parent / "shared")
MICRO = SHARED / "fixtures" / "qwen3-micro"
QWEN06 = SHARED / "models" / "qwen3-0.6b"


def infera(*args, stdin=None):
    return subprocess.run([INFERA, *map(str, args)], input=stdin, capture_output=True, text=True, timeout=300)


def cases(folder):
    return json.loads((folder / "cases.json").read_text())["cases"]


class Help(unittest.TestCase):
    def test_every_subcommand_has_help(self):
        for sub in ["run", "chat", "logits", "tokenize", "detokenize", "embed", "classify", "fill-mask"]:
            r = infera(sub, "--help")
            self.assertEqual(r.returncode, 0, sub)
            self.assertIn("--model", r.stdout, sub)

    def test_no_subcommand_is_an_error(self):
        self.assertNotEqual(infera().returncode, 0)


class Errors(unittest.TestCase):
    def assert_one_line_error(self, r, *fragments):
        self.assertEqual(r.returncode, 1, r.stderr)
        last = r.stderr.strip().splitlines()[-1]
        self.assertTrue(last.startswith("infera: error: "), last)
        for f in fragments:
            self.assertIn(f, last)

    def test_missing_model_folder(self):
        self.assert_one_line_error(infera("run", "--model", "/nonexistent/x", "--prompt-ids", "1"), "/nonexistent/x")

    def test_bad_prompt_ids(self):
        self.assert_one_line_error(infera("run", "--model", MICRO, "--prompt-ids", "1,abc"), "'abc'")

    def test_token_id_outside_vocabulary(self):
        self.assert_one_line_error(infera("run", "--model", MICRO, "--prompt-ids", "999999999"), "vocabulary")

    def test_truncated_weights_name_the_file(self):
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "config.json").write_text((MICRO / "config.json").read_text())
            data = (MICRO / "model.safetensors").read_bytes()
            (Path(d) / "model.safetensors").write_bytes(data[: len(data) // 2])
            self.assert_one_line_error(infera("run", "--model", d, "--prompt-ids", "1"), "model.safetensors")

    def test_bad_sampling_option_prints_nothing_else(self):
        r = infera("run", "--model", MICRO, "--prompt-ids", "1", "--top-p", "1.5")
        self.assert_one_line_error(r, "top_p", "1.5")
        self.assertEqual(r.stdout, "")

    def test_prompt_text_without_tokenizer(self):
        self.assert_one_line_error(infera("run", "--model", MICRO, "--prompt", "hi"), "tokenizer")


class Outputs(unittest.TestCase):
    def test_logits_file_matches_reference(self):
        c = cases(MICRO)[0]
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "l.f32"
            r = infera("logits", "--model", MICRO, "--prompt-ids", ",".join(map(str, c["input_ids"])),
                       "--positions", "all", "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            got, want = array.array("f"), array.array("f")
            got.frombytes(out.read_bytes())
            want.frombytes((MICRO / c["logits_file"]).read_bytes())
            self.assertEqual(len(got), len(want))
            self.assertLess(max_abs_diff(got, want), 1e-4)

    def test_run_json_greedy_equals_reference(self):
        c = cases(MICRO)[1]
        r = infera("run", "--model", MICRO, "--prompt-ids", ",".join(map(str, c["input_ids"])), "--greedy",
                   "--max-tokens", len(c["greedy_new_ids"]), "--ignore-eos", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(j["ids"], c["greedy_new_ids"])
        self.assertEqual(j["finish_reason"], "length")
        self.assertGreater(j["decode_tokens_per_second"], 0)

    def test_run_prints_summary_prompt_output_and_speed(self):
        r = infera("run", "--model", MICRO, "--tokenizer", QWEN06, "--prompt-ids", "785,6722,315,9625,374",
                   "--greedy", "--max-tokens", "3")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertTrue(lines[0].startswith("Model: Qwen3-"), lines[0])
        self.assertIn("(2 layers, 32 dim, 4 Q heads, 2 KV heads)", lines[0])
        self.assertIn("Prompt: The capital of France is (5 tokens)", r.stdout)
        self.assertIn("tok/s", lines[-1])

    def test_dummy_weights_on_the_released_config(self):
        r = infera("run", "--model", QWEN06, "--dummy-weights", "--synthetic-prompt", "4", "--max-tokens", "2",
                   "--ignore-eos", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(j["model"], "Qwen3-0.6B (28 layers, 1024 dim, 16 Q heads, 8 KV heads)")
        self.assertEqual(len(j["ids"]), 2)

    def test_tokenize_and_detokenize_round_trip(self):
        lines = "\n".join(json.dumps({"text": t}) for t in ["The capital of France is", "héllo 👋\n\tworld"])
        r = infera("tokenize", "--model", QWEN06, stdin=lines + "\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        ids = [json.loads(l)["ids"] for l in r.stdout.splitlines()]
        self.assertEqual(ids[0], [785, 6722, 315, 9625, 374])
        back = infera("detokenize", "--model", QWEN06, stdin=r.stdout)
        self.assertEqual(back.returncode, 0, back.stderr)
        self.assertEqual([json.loads(l)["text"] for l in back.stdout.splitlines()],
                         ["The capital of France is", "héllo 👋\n\tworld"])


BERT = SHARED / "fixtures" / "modernbert-micro"
BERT_MLM = SHARED / "fixtures" / "modernbert-mlm-micro"
BERT_CLS = SHARED / "fixtures" / "modernbert-cls-micro"


def read_f32(path):
    a = array.array("f")
    a.frombytes(Path(path).read_bytes())
    return a


class Encoders(unittest.TestCase):
    """embed / fill-mask / classify on token ids against the transformers fixtures (max abs 1e-3)."""

    def run_ok(self, *args):
        r = infera(*args)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def test_embed_ragged_and_padded_inputs_match_reference(self):
        c = cases(BERT)[1]
        with tempfile.TemporaryDirectory() as d:
            ragged, padded, out = Path(d) / "ids.json", Path(d) / "padded.json", Path(d) / "h.f32"
            ragged.write_text(json.dumps(c["input_ids"]))
            width = max(map(len, c["input_ids"]))
            padded.write_text(json.dumps({
                "input_ids": [s + [4092] * (width - len(s)) for s in c["input_ids"]],
                "attention_mask": [[1] * len(s) + [0] * (width - len(s)) for s in c["input_ids"]]}))
            want = read_f32(BERT / c["hidden_file"])
            for f in (ragged, padded):
                self.run_ok("embed", "--model", BERT, "--input-ids-json", f, "--out", out)
                self.assertLessEqual(max_abs_diff(read_f32(out), want), 1e-3, f.name)

    def test_fill_mask_logits_and_top_ids_match_reference(self):
        cs = cases(BERT_MLM)[:2]  # the cases whose positions are [MASK] tokens
        with tempfile.TemporaryDirectory() as d:
            ids, out = Path(d) / "ids.json", Path(d) / "m.f32"
            ids.write_text(json.dumps([c["input_ids"] for c in cs]))
            r = self.run_ok("fill-mask", "--model", BERT_MLM, "--input-ids-json", ids, "--mask-id", "4093",
                            "--out", out)
            want = array.array("f")
            for c in cs:
                want.extend(read_f32(BERT_MLM / c["logits_file"]))
            self.assertLessEqual(max_abs_diff(read_f32(out), want), 1e-3)
            lines = [json.loads(l) for l in r.stdout.splitlines()]
            self.assertEqual([(l["sequence"], l["position"]) for l in lines], [(0, 5), (0, 77), (0, 150), (1, 3)])
            self.assertEqual([[t["id"] for t in l["top"]] for l in lines], [t for c in cs for t in c["top5_ids"]])

    def test_classify_logits_match_reference(self):
        cs = cases(BERT_CLS)
        with tempfile.TemporaryDirectory() as d:
            ids = Path(d) / "ids.json"
            ids.write_text(json.dumps([c["input_ids"] for c in cs]))
            r = self.run_ok("classify", "--model", BERT_CLS, "--input-ids-json", ids)
            lines = [json.loads(l) for l in r.stdout.splitlines()]
            self.assertEqual(len(lines), 3)
            for line, c in zip(lines, cs):
                self.assertLessEqual(max_abs_diff(line["logits"], c["logits"]), 1e-3)
                best = max(range(3), key=lambda i: c["logits"][i])
                self.assertEqual(line["label"], f"LABEL_{best}")

    def test_encoder_errors_are_one_line(self):
        with tempfile.TemporaryDirectory() as d:
            ids = Path(d) / "ids.json"
            ids.write_text("[[4090, 5, 4091]]")
            Errors.assert_one_line_error(self, infera("classify", "--model", BERT, "--input-ids-json", ids),
                                         "no classifier head")
            Errors.assert_one_line_error(self, infera("fill-mask", "--model", BERT_MLM, "--input-ids-json", ids,
                                                      "--mask-id", "4093"), "no mask token")
            Errors.assert_one_line_error(self, infera("run", "--model", BERT, "--prompt-ids", "1"), "encoder")
            ids.write_text('{"input_ids": [[1, 2]], "attention_mask": [[0, 1]]}')
            Errors.assert_one_line_error(self, infera("embed", "--model", BERT, "--input-ids-json", ids,
                                                      "--out", Path(d) / "x.f32"), "right padding")
            ids.write_text('[[1, "a"]]')
            Errors.assert_one_line_error(self, infera("embed", "--model", BERT, "--input-ids-json", ids,
                                                      "--out", Path(d) / "x.f32"), "not a token id")
            ids.write_text('[[1, 99999]]')
            Errors.assert_one_line_error(self, infera("embed", "--model", BERT, "--input-ids-json", ids,
                                                      "--out", Path(d) / "x.f32"), "vocabulary")
            Errors.assert_one_line_error(self, infera("embed", "--model", BERT, "--text", "hi",
                                                      "--out", Path(d) / "x.f32"), "tokenizer")

    def test_text_input_goes_through_the_tokenizer_with_cls_and_sep(self):
        # No ModernBERT tokenizer.json is in the fixtures: the Qwen3 one (its ids fit a dummy
        # ModernBERT of Qwen3's vocabulary size) shows the text path; [CLS]/[SEP] from config.json.
        tok = infera("tokenize", "--model", QWEN06, stdin=json.dumps({"text": "The capital of France is"}) + "\n")
        ids = json.loads(tok.stdout)["ids"]
        with tempfile.TemporaryDirectory() as d:
            cfg = json.loads((BERT / "config.json").read_text())
            cfg.update(vocab_size=151936, cls_token_id=151643, sep_token_id=151645)
            (Path(d) / "config.json").write_text(json.dumps(cfg))
            out_text, out_ids, ids_file = Path(d) / "t.f32", Path(d) / "i.f32", Path(d) / "ids.json"
            ids_file.write_text(json.dumps([[151643] + ids + [151645]]))
            common = ["--model", d, "--dummy-weights", "--tokenizer", QWEN06]
            self.run_ok("embed", *common, "--text", "The capital of France is", "--out", out_text)
            self.run_ok("embed", *common, "--input-ids-json", ids_file, "--out", out_ids)
            a, b = read_f32(out_text), read_f32(out_ids)
            self.assertEqual(len(a), (len(ids) + 2) * 64)
            self.assertEqual(max_abs_diff(a, b), 0.0)


if __name__ == "__main__":
    if "--infera" in sys.argv:
        i = sys.argv.index("--infera")
        INFERA = sys.argv[i + 1]
        del sys.argv[i:i + 2]
    else:
        INFERA = "build/release/infera"
    unittest.main(verbosity=2)
