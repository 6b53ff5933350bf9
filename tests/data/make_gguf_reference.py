#!/usr/bin/env python3
"""A reference GGUF written by the `gguf` package's GGUFWriter (llama.cpp's own Python writer),
for tests/io/test_gguf.cpp to read with our parser. Never produced by our code.

Writes to tests/data/gguf/:
  reference.gguf         metadata of every value type (scalars, arrays of each, nested arrays
                         and unicode strings; the writer refuses empty arrays) and one tensor
                         of each supported type
  reference.json         what the C++ test must find: each key's type and value, each tensor's
                         name, ggml type, GGUF dims (innermost first) and the byte range of its
                         data in reference.tensors
  reference.tensors      the tensors' bytes, concatenated (as handed to the writer)

Run: scripts/setup_python.sh && .venv/bin/python tests/data/make_gguf_reference.py
"""
import json
import pathlib

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFValueType as V
from gguf import GGUFWriter, quants

OUT = pathlib.Path(__file__).resolve().parent / "gguf"
rng = np.random.default_rng(11)

METADATA = [
    ("general.architecture", V.STRING, "qwen3"),
    ("test.u8", V.UINT8, 200),
    ("test.i8", V.INT8, -100),
    ("test.u16", V.UINT16, 60000),
    ("test.i16", V.INT16, -30000),
    ("test.u32", V.UINT32, 4000000000),
    ("test.i32", V.INT32, -2000000000),
    ("test.u64", V.UINT64, 18000000000000000000),
    ("test.i64", V.INT64, -9000000000000000000),
    ("test.f32", V.FLOAT32, 0.15625),
    ("test.f64", V.FLOAT64, -1e300),
    ("test.bool_true", V.BOOL, True),
    ("test.bool_false", V.BOOL, False),
    ("test.string", V.STRING, "h\u00e9llo \u4e16\u754c \U0001f600"),
    ("test.empty_string", V.STRING, ""),
]
ARRAYS = [
    ("test.array_i32", V.INT32, [1, -2, 3, 2147483647]),
    ("test.array_u8", V.UINT8, [0, 255, 7]),
    ("test.array_f32", V.FLOAT32, [0.5, -2.25]),
    ("test.array_bool", V.BOOL, [True, False, True]),
    ("test.array_string", V.STRING, ["a", "", "\u00fc b"]),
]


def main() -> None:
    OUT.mkdir(exist_ok=True)
    w = GGUFWriter(OUT / "reference.gguf", arch="qwen3")
    expected = {"metadata": {}, "tensors": []}
    for key, vtype, value in METADATA:
        if key != "general.architecture":
            w.add_key_value(key, value, vtype)
        expected["metadata"][key] = {"type": vtype.name, "value": value}
    for key, etype, values in ARRAYS:
        w.add_key_value(key, values, V.ARRAY, sub_type=etype)
        expected["metadata"][key] = {"type": "ARRAY", "elem_type": etype.name, "value": values}
    nested = [[1, 2], [3]]
    w.add_key_value("test.array_nested", nested, V.ARRAY)
    expected["metadata"]["test.array_nested"] = {"type": "ARRAY", "elem_type": "ARRAY", "value": nested}

    blobs = []
    offset = 0
    for name, qtype, shape in [("t_f32", T.F32, (3, 5)), ("t_f16", T.F16, (2, 7)),
                               ("t_bf16", T.BF16, (4, 3)), ("t_q8_0", T.Q8_0, (3, 64)),
                               ("t_q4_0", T.Q4_0, (2, 96)), ("t_q4_k", T.Q4_K, (2, 512)),
                               ("t_q6_k", T.Q6_K, (3, 256)), ("t_vector", T.F32, (17,)),
                               ("t_3d", T.F32, (2, 3, 4))]:
        values = rng.standard_normal(shape).astype(np.float32)
        if qtype in (T.Q4_K, T.Q6_K):  # no reference quantizer: random blocks, finite scales
            block, size = quants.GGML_QUANT_SIZES[qtype]
            raw = rng.integers(0, 256, size=(shape[0], shape[1] // block * size), dtype=np.uint8)
            data = raw
        else:
            data = quants.quantize(values, qtype)
        w.add_tensor(name, data, raw_dtype=qtype)
        nbytes = data.nbytes
        blobs.append(np.ascontiguousarray(data).view(np.uint8).tobytes())
        expected["tensors"].append({"name": name, "type": qtype.name, "ggml_type": int(qtype),
                                    "dims": list(reversed(shape)), "bytes": [offset, offset + nbytes]})
        offset += nbytes
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    (OUT / "reference.tensors").write_bytes(b"".join(blobs))
    (OUT / "reference.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
