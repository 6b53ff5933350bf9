#!/usr/bin/env bash
# Stages binaries built here for a run on a lent GPU machine, whose image has the CUDA runtime and
# cuBLAS but not this machine's Debian libraries (PCRE2, utf8proc, Highway, ...):
#   scripts/device_stage.sh DEST BINARY [BINARY ...]
# writes DEST/bin.tar.xz (the binaries, stripped, under bin/), DEST/lib/ (each shared library
# they link that is neither CUDA's nor the C/C++ runtime's) and DEST/shared.tar.xz (the reference
# fixtures and model configs from $INFERA_SHARED_DIR, default ../shared), and prints the sizes.
# A run script in DEST then does, on the device machine:
#   cd "$(dirname "$0")"; tar xJf bin.tar.xz; tar xJf shared.tar.xz
#   export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH INFERA_SHARED_DIR=$PWD/shared
# Everything staged counts towards the 64 MiB that one device call may carry.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 DEST BINARY [BINARY ...]" >&2
  exit 2
fi
dest=$1
shift
shared=${INFERA_SHARED_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/shared}
[ -d "$shared/fixtures" ] || { echo "no fixtures under $shared (set INFERA_SHARED_DIR)" >&2; exit 2; }
mkdir -p "$dest/lib"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin"
for b in "$@"; do
  [ -x "$b" ] || { echo "not an executable: $b" >&2; exit 2; }
  cp "$b" "$stage/bin/"
  strip "$stage/bin/$(basename "$b")"
  # Libraries resolved outside CUDA's folders, less the C and C++ runtimes every image has.
  ldd "$b" | awk '$3 ~ /^\// {print $3}' | grep -v -E '/cuda|libcuda|libcublas|libcudart' |
    grep -v -E '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' |
    while read -r lib; do cp -L "$lib" "$dest/lib/"; done
done
tar -C "$stage" -cJf "$dest/bin.tar.xz" bin
tar -C "$(dirname "$shared")" -cJf "$dest/shared.tar.xz" "$(basename "$shared")"
du -sh "$dest/bin.tar.xz" "$dest/lib" "$dest/shared.tar.xz"
