#!/usr/bin/env python3
"""End-to-end checks of `infera decide` (the decision runtime): the token-id form against the
PyTorch reference outputs of fixtures/decision-micro, a text request through a tokenizer.json,
and malformed requests failing with one line and no output. Standard library only.

decision-micro has no tokenizer.json: the text tests use tests/data/tokenizer_parity/
wordpiece_bert.json (700 ids, HF tokenizers) with its [CLS]/[SEP]/[PAD]/[MASK] moved to the ids
decision-micro's config uses (4090-4093), written next to symlinks of the fixture's files.

    python3 tests/cli/test_decide.py --infera build/release/infera
"""
import json, sys, tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nan_safe import max_abs_diff  # noqa: E402
from cli_common import FIXTURES, ROOT, CliTestCase, infera, main  # noqa: E402

MICRO = FIXTURES / "decision-micro"


def micro_tokenizer():
    j = json.loads((ROOT / "tests/data/tokenizer_parity/wordpiece_bert.json").read_text())
    moved = {"[CLS]": 4090, "[SEP]": 4091, "[PAD]": 4092, "[MASK]": 4093}
    for t in j["added_tokens"]:
        if t["content"] in moved:
            t["id"] = moved[t["content"]]
    for tok, i in moved.items():
        j["model"]["vocab"][tok] = i
    for name, entry in j["post_processor"]["special_tokens"].items():
        entry["ids"] = [moved[name]]
    return j


class Decide(CliTestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)
        self.model = self.dir / "model"
        self.model.mkdir()
        for f in ["encoder_config.json", "decision_config.json", "model.safetensors"]:
            (self.model / f).symlink_to(MICRO / f)
        (self.model / "tokenizer.json").write_text(json.dumps(micro_tokenizer()))

    def tearDown(self):
        self.tmp.cleanup()

    def decide(self, request, *extra):
        path = self.dir / "req.json"
        path.write_text(request if isinstance(request, str) else json.dumps(request))
        return infera("decide", "--model", self.model, "--request", path, *extra)

    def test_help(self):
        r = infera("decide", "--help")
        self.assertEqual(r.returncode, 0)
        for opt in ["--model", "--request", "--weights", "--max-batch-questions", "--token-budget"]:
            self.assertIn(opt, r.stdout)

    def test_token_id_form_matches_reference_in_order(self):
        cases = json.loads((MICRO / "cases.json").read_text())["cases"]
        order = [2, 0, 3, 1, 0]  # reordered, one duplicated
        for extra in [(), ("--max-batch-questions", "1"), ("--no-prune",)]:
            r = self.decide({"inputs": [cases[i]["input_ids"] for i in order]}, *extra)
            self.assertEqual(r.returncode, 0, r.stderr)
            out = json.loads(r.stdout)
            self.assertEqual(len(out["results"]), len(order))
            for got, i in zip(out["results"], order):
                for key in ["option_logits", "option_probs", "features", "action_logits", "action_probs"]:
                    self.assertLessEqual(max_abs_diff(got[key], cases[i][key]), 1e-4, (extra, i, key))
            self.assertEqual(out["counts"]["questions"], 5)
            self.assertEqual(out["counts"]["unique_forward_inputs"], 4)
            self.assertEqual(out["counts"]["tokens_evaluated"],
                             sum(len(cases[i]["input_ids"]) for i in set(order)))

    def test_text_request(self):
        req = {"state": {"order": 17, "note": "arrived [MASK] broken"},
               "questions": [
                   {"qtype": "choice", "text": "refund?", "options": ["yes", "no"], "criteria": ["policy"]},
                   {"qtype": "score", "text": "how upset?",
                    "options": [{"label": "calm", "value": 0}, {"label": "angry", "value": 10}]}]}
        r = self.decide(req, "--timing")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        a, s = out["results"]
        self.assertIn(a["answer"], ["yes", "no"])
        self.assertEqual(len(a["probs"]), 2)
        self.assertAlmostEqual(sum(a["probs"]), 1.0, places=5)
        self.assertEqual(a["top2"][0]["label"], a["answer"])
        self.assertEqual(sorted(a["action_probs"]), ["abstain", "answer", "escalate"])
        self.assertNotIn("expected_value", a)
        self.assertAlmostEqual(s["expected_value"], 10 * s["probs"][1], places=5)
        self.assertIn("prepare", out["timing_ms"])
        # Quantized weights run too and agree on the answer here.
        q = self.decide(req, "--weights", "int8-g64")
        self.assertEqual(q.returncode, 0, q.stderr)
        self.assertLessEqual(max_abs_diff(json.loads(q.stdout)["results"][0]["probs"], a["probs"]), 0.05)

    def test_malformed_requests_are_one_line_errors_without_output(self):
        bad = [
            ('{"state": "s", "questions": [{"qtype": "choice", "text": "t", "options": []}]}', "no options"),
            ('{"state": "s", "questions": [{"qtype": "vote", "text": "t", "options": ["a"]}]}', "unknown qtype"),
            ('{"state": "s", "questions": [{"qtype": "score", "text": "t", "options": ["a"]}]}', "score option"),
            ('{"state": "s", "questions": [', "not valid JSON"),
            (b'{"state": "\xff", "questions": []}'.decode("latin-1"), "not valid UTF-8"),
            ('{"inputs": [[4090, 1, 4091]]}', "no option marker"),
            ('[' * 200 + ']' * 200, "deeper"),
        ]
        for body, fragment in bad:
            path = self.dir / "bad.json"
            path.write_bytes(body.encode("latin-1") if "\xff" in body else body.encode())
            r = infera("decide", "--model", self.model, "--request", path)
            self.assert_one_line_error(r, fragment)
            self.assertEqual(r.stdout, "", body)
        r = self.decide({"inputs": [[4090, 4093]]}, "--max-batch-questions", "65")
        self.assertEqual(r.returncode, 1)
        self.assertIn("[1, 64]", r.stderr)


if __name__ == "__main__":
    main()
