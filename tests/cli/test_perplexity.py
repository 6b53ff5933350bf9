#!/usr/bin/env python3
"""`infera perplexity` on the shipped demo model (models/infera-demo) equals transformers' on the
same held-out text (tests/data/infera-demo: reference.json, made by make_reference.py with
transformers in f32 over the same bf16 weights and the same windows). Standard library only.

    python3 tests/cli/test_perplexity.py --infera build/release/infera
"""
import json, math, sys, tempfile
from pathlib import Path

from cli_common import DEMO as MODEL, ROOT, CliTestCase, infera, main  # noqa: E402

DATA = ROOT / "tests" / "data" / "infera-demo"
# Both sides sum the same f32 log-probabilities; per-logit differences are ~1e-5, so the mean NLL
# agrees to ~1e-6 relative. 1e-3 is the bar and still catches any real forward-pass bug.
RELATIVE_TOLERANCE = 1e-3


class Perplexity(CliTestCase):
    def test_help(self):
        r = infera("perplexity", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("--text-file", r.stdout)

    def test_heldout_perplexity_equals_transformers(self):
        ref = json.loads((DATA / "reference.json").read_text())["perplexity"]
        r = infera("perplexity", "--model", MODEL, "--text-file", DATA / "heldout.txt",
                   "--context", ref["context"], "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)
        self.assertEqual(got["tokens"], ref["tokens"])
        self.assertEqual(got["scored_tokens"], ref["scored_tokens"])
        rel = abs(got["perplexity"] - ref["perplexity"]) / ref["perplexity"]
        print(f"infera {got['perplexity']:.6f} vs transformers {ref['perplexity']:.6f}: "
              f"relative difference {rel:.2e}", file=sys.stderr)
        self.assertTrue(math.isfinite(got["perplexity"]))
        self.assertLess(rel, RELATIVE_TOLERANCE)  # a NaN fails here too

    def test_chunking_does_not_change_the_result(self):
        args = ["perplexity", "--model", MODEL, "--text-file", DATA / "heldout.txt",
                "--context", 300, "--json"]
        a = json.loads(infera(*args, "--chunk", 300).stdout)
        b = json.loads(infera(*args, "--chunk", 37).stdout)
        self.assertEqual(a["scored_tokens"], b["scored_tokens"])
        self.assertLess(abs(a["mean_nll"] - b["mean_nll"]), 1e-5)

    def test_missing_text_file(self):
        self.assert_one_line_error(
            infera("perplexity", "--model", MODEL, "--text-file", "/nonexistent/t.txt"),
            "/nonexistent/t.txt")

    def test_too_short_text_and_bad_context(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write("A")
            f.flush()
            self.assert_one_line_error(
                infera("perplexity", "--model", MODEL, "--text-file", f.name), "at least 2")
        self.assert_one_line_error(
            infera("perplexity", "--model", MODEL, "--text-file", DATA / "heldout.txt",
                   "--context", 1), "--context")
        self.assert_one_line_error(
            infera("perplexity", "--model", MODEL, "--text-file", DATA / "heldout.txt",
                   "--context", 5000), "max_position_embeddings")

    def test_invalid_utf8_is_an_error(self):
        with tempfile.NamedTemporaryFile("wb", suffix=".txt") as f:
            f.write(b"good text \xff\xfe more")
            f.flush()
            self.assert_one_line_error(
                infera("perplexity", "--model", MODEL, "--text-file", f.name), "UTF-8")


if __name__ == "__main__":
    main()
