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
        for sub in ["run", "chat", "logits", "tokenize", "detokenize"]:
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

    def test_batch_runs_copies_together_with_the_reference_output(self):
        c = cases(MICRO)[1]
        r = infera("run", "--model", MICRO, "--prompt-ids", ",".join(map(str, c["input_ids"])), "--greedy",
                   "--max-tokens", len(c["greedy_new_ids"]), "--ignore-eos", "--json", "--batch", "3",
                   "--kv-dtype", "f32", "--max-batch-tokens", "8")
        self.assertEqual(r.returncode, 0, r.stderr)
        results = [json.loads(l) for l in r.stdout.splitlines()]
        self.assertEqual(len(results), 3)
        for j in results:
            self.assertEqual(j["ids"], c["greedy_new_ids"])

    def test_prompt_file_equals_each_prompt_alone(self):
        prompts = ["The capital of France is", "Write a haiku about the sea.", "1 2 3 4"]
        with tempfile.TemporaryDirectory() as d:
            f = Path(d) / "prompts.txt"
            f.write_text("\n".join(prompts) + "\n\n")
            common = ["--model", MICRO, "--tokenizer", QWEN06, "--greedy", "--max-tokens", "6", "--ignore-eos",
                      "--json"]
            r = infera("run", *common, "--prompt-file", f)
            self.assertEqual(r.returncode, 0, r.stderr)
            together = [json.loads(l)["ids"] for l in r.stdout.splitlines()]
            self.assertEqual(len(together), 3)
            for p, ids in zip(prompts, together):
                alone = infera("run", *common, "--prompt", p)
                self.assertEqual(alone.returncode, 0, alone.stderr)
                self.assertEqual(json.loads(alone.stdout)["ids"], ids)
            text = infera("run", *common[:-1], "--prompt-file", f)
            self.assertEqual(text.returncode, 0, text.stderr)
            self.assertIn("Requests: 3, run together", text.stdout)
            self.assertIn("[2] Prompt: 1 2 3 4", text.stdout)
            self.assertIn("requests", text.stdout.splitlines()[-1])

    def test_unknown_device_and_bad_engine_options_are_named(self):
        for args in (["--device", "tpu"], ["--kv-dtype", "int3"], ["--batch", "0"]):
            r = infera("run", "--model", MICRO, "--prompt-ids", "1,2", *args)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(args[0], r.stderr.splitlines()[0])  # CLI11 adds a "Run with --help" line

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


if __name__ == "__main__":
    if "--infera" in sys.argv:
        i = sys.argv.index("--infera")
        INFERA = sys.argv[i + 1]
        del sys.argv[i:i + 2]
    else:
        INFERA = "build/release/infera"
    unittest.main(verbosity=2)
