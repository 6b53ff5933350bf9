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

# Ids without a token (e.g. the pad rows of a model's embedding) are skipped, as tokenizers does.
out=$(echo '{"ids": [785, 151700, 99999999]}' | "$bin" detokenize --model "$model")
[ "$out" = '{"text":"The"}' ] || fail "unknown ids: $out"
err=$(echo '{"ids": [1099511627776]}' | "$bin" detokenize --model "$model" 2>&1 >/dev/null)
[ $? -ne 0 ] || fail "id beyond int32 did not fail"
echo "$err" | grep -q "out of range" || fail "error does not name the id: $err"

# Special tokens and pairs, on a ModernBERT-shaped file built with tokenizers (expected ids from
# tests/data/tokenizer_parity/bytelevel_modernbert.cases.jsonl, i.e. from tokenizers itself).
mb="$(dirname "$0")/../data/tokenizer_parity/bytelevel_modernbert.json"
out=$(echo '{"text": "Hello world!"}' | "$bin" tokenize --model "$mb")
[ "$out" = '{"ids":[364,361,7]}' ] || fail "modernbert plain: $out"
out=$(echo '{"text": "Hello world!"}' | "$bin" tokenize --add-special-tokens --model "$mb")
[ "$out" = '{"ids":[3,364,361,7,4]}' ] || fail "modernbert special: $out"
out=$(echo '{"text": "Hello world!", "text_pair": "Don'"'"'t panic"}' |
      "$bin" tokenize --add-special-tokens --model "$mb")
[ "$out" = '{"ids":[3,364,361,7,4,484,362,291,498,374,4],"type_ids":[0,0,0,0,0,1,1,1,1,1,1]}' ] ||
  fail "modernbert pair: $out"
err=$(echo '{"text": "a", "text_pair": 5}' | "$bin" tokenize --model "$mb" 2>&1 >/dev/null)
[ $? -ne 0 ] || fail "non-string text_pair did not fail"
echo "$err" | grep -q "text_pair" || fail "error does not name text_pair: $err"
# Qwen3 has no special-token post-processor: the flag changes nothing.
out=$(echo '{"text": "The capital of France is"}' | "$bin" tokenize --add-special-tokens --model "$model")
[ "$out" = '{"ids":[785,6722,315,9625,374]}' ] || fail "qwen3 with --add-special-tokens: $out"

"$bin" tokenize --help | grep -q -- "--model" || fail "--help"
"$bin" tokenize --model /nonexistent </dev/null 2>/dev/null && fail "missing model folder succeeded"
echo "cli ok"
