"""What every CLI test script shares: where the binary and the fixtures are, running the binary,
reading .f32 outputs, the one-line error check, and the `--infera PATH [unittest args]` entry
point. Standard library only.

Each script runs as `python3 tests/cli/test_X.py --infera build/release/infera` (ctest passes the
built binary); without --infera the release build of this checkout is used.
"""
import array, json, os, subprocess, sys, tempfile, unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("INFERA_SHARED_DIR") or ROOT.parent / "shared")
FIXTURES = SHARED / "fixtures"
QWEN3_MICRO = FIXTURES / "qwen3-micro"
QWEN06 = SHARED / "models" / "qwen3-0.6b"
DEMO = ROOT / "models" / "infera-demo"

_binary = str(ROOT / "build" / "release" / "infera")
_scratch = None


def infera(*args, stdin=None, timeout=600):
    """Runs the binary with `args` (paths and numbers are str()-ed); never raises on exit codes."""
    return subprocess.run([_binary, *map(str, args)], input=stdin, capture_output=True, text=True,
                          timeout=timeout)


def binary():
    """The binary under test (for tests that need subprocess options infera() does not offer)."""
    return _binary


def scratch():
    """A temporary folder that lives for the whole run (files made once, shared by tests)."""
    return Path(_scratch)


def cases(folder):
    return json.loads((Path(folder) / "cases.json").read_text())["cases"]


def read_f32(path):
    a = array.array("f")
    a.frombytes(Path(path).read_bytes())
    return a


class CliTestCase(unittest.TestCase):
    def assert_one_line_error(self, r, *fragments):
        """Exit code 1 and a last stderr line `infera: error: ...` naming every fragment."""
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertTrue(lines, "no error message")
        last = lines[-1]
        self.assertTrue(last.startswith("infera: error: "), last)
        for f in fragments:
            self.assertIn(str(f), last)


def main():
    """`--infera PATH` picks the binary; every other argument goes to unittest."""
    global _binary, _scratch
    args = sys.argv[1:]
    if "--infera" in args:
        i = args.index("--infera")
        if i + 1 >= len(args):
            sys.exit(f"usage: {sys.argv[0]} --infera PATH [unittest args]")
        _binary = args[i + 1]
        del args[i:i + 2]
    with tempfile.TemporaryDirectory() as d:
        _scratch = d
        unittest.main(module="__main__", argv=[sys.argv[0], *args], verbosity=2)
