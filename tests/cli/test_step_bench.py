#!/usr/bin/env python3
"""The benchmark harness's step_bench on the CPU: its JSON holds exactly --repeats timed samples
of each prefill mode (the warm-up rounds untimed), rates that are the tokens over the samples'
median, and bad options fail with a message. Standard library only.

    python3 tests/cli/test_step_bench.py --infera build/release/bench/step_bench
"""
import json, math, statistics, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cli_common import FIXTURES, CliTestCase, infera, main, scratch  # noqa: E402

MODEL = FIXTURES / "qwen3-small-untied"


class StepBench(CliTestCase):
    def test_json_holds_the_timed_repeats_and_their_medians(self):
        out = scratch() / "step_bench.json"
        r = infera("--model", MODEL, "--device", "cpu", "--prefill", "48", "--prefill-batch",
                   "2x40", "--batch", "1,3", "--context", "64", "--decode-steps", "4",
                   "--repeats", "3", "--json", out, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(out.read_text())
        cases = j["prefill"] + j["prefill_batch"]
        self.assertEqual([(c["sequences"], c["prompt_tokens"]) for c in cases], [(1, 48), (2, 40)])
        for c in cases:
            tokens = c["sequences"] * c["prompt_tokens"]
            for mode in (c, c["first_token_ids"]):
                samples = mode["seconds"]
                self.assertEqual(len(samples), 3, c)  # --repeats, the warm-up rounds left out
                self.assertTrue(all(math.isfinite(s) and s > 0 for s in samples), samples)
                self.assertEqual(mode["median_seconds"], statistics.median(samples))
                self.assertAlmostEqual(mode["tokens_per_second"],
                                       tokens / statistics.median(samples), delta=1e-6 * tokens)
        self.assertEqual([d["batch"] for d in j["decode"]], [1, 3])

    def test_a_missing_model_is_an_error(self):
        r = infera("--model", scratch() / "no_such_model", "--device", "cpu", timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertTrue(r.stderr.strip(), "no message")


if __name__ == "__main__":
    main()
