#!/usr/bin/env python3
"""`infera eval`: the quality gate of quantized files against the model they came from, on the
qwen3-micro fixture (random weights, real vocabulary) and the trained demo model
(models/infera-demo), over tests/data/infera-demo/heldout.txt, 512 positions. Standard library only.

    python3 tests/cli/test_eval.py --infera build/release/infera

Bounds (KL = mean KL(P_ref || Q_file) in nats per position; top-1 = same argmax):
  - bf16 file (the same bytes): KL exactly 0 at every position, top-1 100%, same perplexity.
    Anything else means the comparison or the GGUF path computes something else.
  - demo q8_0: measured KL mean 8.4e-5, top-1 99.4%; gate KL < 1e-3 and top-1 >= 97%. Q8_0
    rounds each weight to 1/254 of its block's largest magnitude; a logit perturbation of
    relative size e gives KL ~ e^2 Var(logits) / 2, so 8-bit rounding stays near 1e-4. The gate
    leaves 10x room for other machines' summation order, while a kernel bug (wrong scale, sign or
    block) gives KL of 0.1 and more (the wrong-weights file below gives several nats).
  - demo q4_0: measured KL 0.012, top-1 93.4%; gate KL < 0.05, top-1 >= 88% (16 levels instead
    of 256: ~16x the rounding error, ~250x the KL of q8_0 in theory, ~140x measured).
  - micro q8_0 (2 layers of width 32, random weights; each row is one block, so the rounding of
    one large weight moves a whole dot product): measured KL 1.4e-3, top-1 98.4%; gate KL < 0.01,
    top-1 >= 95%.
  - a file of other weights (dummy weights of the same shape) must FAIL those gates: KL > 0.5,
    top-1 < 50% -- the gate can tell a broken model from a quantized one.
"""
import json, sys
from pathlib import Path

from cli_common import DEMO, QWEN06, QWEN3_MICRO as MICRO, ROOT, CliTestCase, infera, main, scratch  # noqa: E402

TEXT = ROOT / "tests" / "data" / "infera-demo" / "heldout.txt"


def quantize(model, kind, *extra):
    out = scratch() / f"{model.name}-{kind}{'-dummy' if extra else ''}.gguf"
    tok = ["--tokenizer", QWEN06] if model == MICRO else []
    r = infera("quantize", "--model", model, *tok, "--type", kind, "--out", out, *extra)
    assert r.returncode == 0, r.stderr
    return out


def evaluate(model, *candidates, extra=()):
    tok = ["--tokenizer", QWEN06] if model == MICRO else []
    args = ["eval", "--model", model, *tok, "--text-file", TEXT, "--json", *extra]
    for c in candidates:
        args += ["--candidate", c]
    r = infera(*args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


class Eval(CliTestCase):
    def check(self, c, kl_bound, top1_bound):
        print(f"{c['model']}: KL mean {c['kl']['mean']:.3e} p95 {c['kl']['p95']:.3e} "
              f"max {c['kl']['max']:.3e}, top-1 {c['top1_agreement']:.4f}, "
              f"ppl ratio {c['perplexity_ratio']:.4f}", file=sys.stderr)
        self.assertLess(c["kl"]["mean"], kl_bound)  # NaN fails (comparisons are False)
        self.assertGreaterEqual(c["top1_agreement"], top1_bound)
        self.assertGreater(c["kl"]["mean"], 0.0)  # really quantized
        self.assertLessEqual(c["kl"]["p50"], c["kl"]["p95"])
        self.assertLessEqual(c["kl"]["p95"], c["kl"]["max"])

    def test_demo_model_gates(self):
        r = evaluate(DEMO, quantize(DEMO, "bf16"), quantize(DEMO, "q8_0"), quantize(DEMO, "q4_0"))
        self.assertEqual(r["positions"], 512)
        self.assertEqual(r["windows"], 1)
        same, q8, q4 = r["candidates"]
        self.assertEqual(same["kl"]["max"], 0.0)
        self.assertEqual(same["top1_agreement"], 1.0)
        self.assertEqual(same["perplexity"], r["reference"]["perplexity"])
        self.assertEqual(q8["format"], "Q8_0")
        self.check(q8, 1e-3, 0.97)
        self.check(q4, 0.05, 0.88)

    def test_micro_gate_and_a_broken_model_fails_it(self):
        r = evaluate(MICRO, quantize(MICRO, "q8_0"), quantize(MICRO, "q8_0", "--dummy-weights"))
        good, broken = r["candidates"]
        self.check(good, 0.01, 0.95)
        self.assertGreater(broken["kl"]["mean"], 0.5)
        self.assertLess(broken["top1_agreement"], 0.5)

    def test_reference_perplexity_is_the_perplexity_commands(self):
        # Same windows (context 513) over the whole text: the reference's mean NLL is
        # `infera perplexity`'s, and a bf16 file's perplexity is the folder's.
        p = infera("perplexity", "--model", DEMO, "--text-file", TEXT, "--context", 513, "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        p = json.loads(p.stdout)
        r = evaluate(DEMO, quantize(DEMO, "bf16"),
                     extra=["--context", 513, "--positions", p["scored_tokens"]])
        self.assertEqual(r["positions"], p["scored_tokens"])
        self.assertEqual(r["windows"], p["windows"])
        self.assertAlmostEqual(r["reference"]["mean_nll"], p["mean_nll"], delta=1e-9)
        self.assertAlmostEqual(r["candidates"][0]["mean_nll"], p["mean_nll"], delta=1e-9)

    def test_errors(self):
        q8 = quantize(DEMO, "q8_0")
        for extra, fragment in [(["--positions", 100], "at least 512"),
                                (["--positions", 5000], "predicted positions")]:
            r = infera("eval", "--model", DEMO, "--candidate", q8, "--text-file", TEXT, *extra)
            self.assert_one_line_error(r, fragment)
        r = infera("eval", "--model", DEMO, "--candidate", quantize(MICRO, "q8_0"), "--text-file", TEXT)
        self.assert_one_line_error(r, "vocabulary")


if __name__ == "__main__":
    main()
