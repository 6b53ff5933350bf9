#!/usr/bin/env bash
# Steps 1-2 of the demo model, on the CPU: the corpus from Debian packages, the tokenizer, the
# tokenized splits, packed as build/demo_model/data.tar.xz for the GPU machine (3.7 MB).
set -euo pipefail
cd "$(dirname "$0")/../.."
tools/train_demo_model/setup_venv.sh
command -v dpkg-deb >/dev/null && command -v apt-get >/dev/null
.venv/bin/python tools/train_demo_model/extract_corpus.py --out build/demo_model/corpus --seed 12
.venv/bin/python tools/train_demo_model/train_tokenizer.py --corpus build/demo_model/corpus \
  --out build/demo_model/tok --vocab 8192
tar -C build/demo_model/tok -cJf build/demo_model/data.tar.xz \
  tokenizer.json tokenizer_config.json tokens.json train.u16 val.u16
ls -la build/demo_model/data.tar.xz
