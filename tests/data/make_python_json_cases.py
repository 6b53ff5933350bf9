#!/usr/bin/env python3
"""Writes python_json_cases.json: JSON texts and what Python renders for them, i.e. what
transformers' `tojson` filter (json.dumps(json.loads(text), ensure_ascii=False)) puts into a
chat template for tool definitions and tool-call arguments. tests/tokenizer/chat_template_json_test.cpp
checks infera::to_python_json against every case. Standard library only.

Usage: python3 tests/data/make_python_json_cases.py
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

INPUTS = [
    # Integers past 64 bits stay exact in Python (nlohmann would read them as doubles).
    '18446744073709551616',
    '-18446744073709551617',
    '{"id": 123456789012345678901234567890, "n": -99999999999999999999999}',
    '[18446744073709551615, -9223372036854775808, 9223372036854775807, 0, -0]',
    # Floats: Python's repr switches to exponent notation outside [1e-4, 1e16).
    '[1e15, 1e16, 1e-5, 0.0001, 1.5e300, -0.0, 123.456, 1E2, 0.1, 2.5e-7, 5e-324]',
    '[1.7976931348623157e308, 9007199254740993.0, 1234567890123456.7, 12345678901234567.0]',
    '[100.0, 1e0, 3.0e-4, 0.00031, 1e22, 1e21, 4.35e-5, 123456789.125]',
    # A repeated key keeps its first position and its last value.
    '{"a": 1, "b": [true, false, null], "a": {"c": "d"}}',
    # Strings: escapes as Python writes them, non-ASCII kept.
    '{"s": "caf\\u00e9 \\n\\t\\r\\b\\f \\u0001 \\" \\\\ \\/ \\ud83d\\ude00 \u4e2d"}',
    '{"type": "function", "function": {"name": "f", "parameters": {"type": "object", '
    '"properties": {"x": {"type": "integer", "maximum": 340282366920938463463374607431768211456}}}}}',
    '[]',
    '{}',
    '[[[[[["deep but fine"]]]]]]',
]


def main():
    cases = [{"input": text, "expected": json.dumps(json.loads(text), ensure_ascii=False)}
             for text in INPUTS]
    with open(os.path.join(HERE, "python_json_cases.json"), "w", encoding="utf-8") as f:
        json.dump({"generator": "tests/data/make_python_json_cases.py", "cases": cases}, f,
                  ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
