#!/usr/bin/env python3
"""Reference blocks for tests/quant/quant_reference_test.cpp, from the `gguf` package (llama.cpp's
own Python reference of the block formats), never from our code.

Writes to tests/data/quant/:
  input.f32                    4096 f32 values (16 rows of 256): varied magnitudes, zero, constant
                               and tie blocks, so every branch of the quantizers is reached
  {q8_0,q4_0}.blocks           gguf.quants.quantize(input) (gguf has reference quantizers for these)
  {type}.random.blocks         random block bytes (finite f16 scales) for q8_0, q4_0, q4_k, q6_k
  {type}.random.f32            gguf.quants.dequantize of those blocks
  f16.f32 / f16.f16            values and numpy's float16 rounding of them (the scale rounding)

Run: scripts/setup_python.sh && .venv/bin/python tests/data/make_quant_reference.py
"""
import pathlib

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

OUT = pathlib.Path(__file__).resolve().parent / "quant"
rng = np.random.default_rng(20240611)


def make_input() -> np.ndarray:
    rows = []
    for r in range(16):
        scale = 10.0 ** rng.uniform(-6, 3)
        rows.append(rng.standard_normal(256).astype(np.float32) * np.float32(scale))
    x = np.stack(rows)
    x[1, :32] = 0.0  # an all-zero block
    x[2, 32:64] = 0.75  # a constant block
    x[3, :32] = np.arange(32, dtype=np.float32) - 16.0  # ties for the 4-bit rounding
    x[4, :32] = (np.arange(32, dtype=np.float32) + 0.5) * np.float32(127.0 / 32.0)  # ties for q8_0
    x[5, 7] = 1e4  # an outlier
    x[6, :] = np.abs(x[6, :])  # all positive (K-quant min = 0 branch)
    x[7, :] = -np.abs(x[7, :])  # all negative
    x[8, 100] = -x[8, :].__abs__().max() * 3  # negative extreme sets the q4_0 sign
    return x.astype(np.float32)


def random_blocks(qtype: T, n: int) -> np.ndarray:
    block_size, type_size = quants.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n, type_size), dtype=np.uint8)
    # f16 scale fields: keep them finite (exponent != 31) so results compare bit for bit without
    # NaN payload questions; every other byte stays fully random.
    d_offsets = {T.Q8_0: [0], T.Q4_0: [0], T.Q4_K: [0, 2], T.Q6_K: [type_size - 2]}[qtype]
    for off in d_offsets:
        raw[:, off + 1] &= 0xBB  # clears exponent bits 4 and 6 of the high byte: never all ones
    return raw


def main() -> None:
    OUT.mkdir(exist_ok=True)
    x = make_input()
    x.tofile(OUT / "input.f32")
    for name, qtype in (("q8_0", T.Q8_0), ("q4_0", T.Q4_0)):
        quants.quantize(x, qtype).tofile(OUT / f"{name}.blocks")
    for name, qtype in (("q8_0", T.Q8_0), ("q4_0", T.Q4_0), ("q4_k", T.Q4_K), ("q6_k", T.Q6_K)):
        block_size, _ = quants.GGML_QUANT_SIZES[qtype]
        blocks = random_blocks(qtype, 4096 // block_size)
        blocks.tofile(OUT / f"{name}.random.blocks")
        deq = quants.dequantize(blocks.reshape(-1), qtype).astype(np.float32)
        deq.tofile(OUT / f"{name}.random.f32")
    f = np.concatenate([
        rng.standard_normal(2000).astype(np.float32) * np.float32(10.0) ** rng.uniform(-9, 5, 2000).astype(np.float32),
        np.array([0.0, -0.0, 65504.0, 65519.0, 65520.0, 1e6, 2.0**-24, 2.0**-25, 3 * 2.0**-26,
                  2.0**-14, 2.0**-14 - 2.0**-25, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11], dtype=np.float32),
    ]).astype(np.float32)
    f.tofile(OUT / "f16.f32")
    f.astype(np.float16).tofile(OUT / "f16.f16")


if __name__ == "__main__":
    main()
