#!/bin/sh
# End-to-end check of `tokenize` / `detokenize`: usage: cli_test.sh BINARY MODEL_DIR
set -u
bin=$1
model=${INFERA_SHARED_DIR:+$INFERA_SHARED_DIR/models/qwen3-0.6b}
model=${model:-$2}
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$(printf '%s\n' '{"text": "The capital of France is"}' '' '{"text": "<|im_end|>ok"}' |
      "$bin" tokenize --model "$model") || fail "tokenize exited non-zero"
expected='{"ids":[785,6722,315,9625,374]}
{"ids":[151645,562]}'
[ "$out" = "$expected" ] || fail "tokenize output: $out"

out=$(printf '%s\n' '{"ids": [785, 6722, 315, 9625, 374]}' '{"ids": [151645, 562]}' |
      "$bin" detokenize --model "$model") || fail "detokenize exited non-zero"
expected='{"text":"The capital of France is"}
{"text":"<|im_end|>ok"}'
[ "$out" = "$expected" ] || fail "detokenize output: $out"

out=$(echo '{"ids": [151645, 562]}' | "$bin" detokenize --skip-special-tokens --model "$model")
[ "$out" = '{"text":"ok"}' ] || fail "skip special: $out"

err=$(printf '%s\n' '{"text": "fine"}' '{"text": broken' | "$bin" tokenize --model "$model" 2>&1 >/dev/null)
[ $? -ne 0 ] || fail "bad JSON line did not fail"
echo "$err" | grep -q "stdin line 2" || fail "error does not name the line: $err"

err=$(echo '{"ids": [99999999]}' | "$bin" detokenize --model "$model" 2>&1 >/dev/null)
[ $? -ne 0 ] || fail "out-of-range id did not fail"
echo "$err" | grep -q "out of range" || fail "error does not name the id: $err"

"$bin" tokenize --help | grep -q -- "--model" || fail "--help"
"$bin" tokenize --model /nonexistent </dev/null 2>/dev/null && fail "missing model folder succeeded"
echo "cli ok"
