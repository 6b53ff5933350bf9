#!/usr/bin/env python3
"""Renders Qwen3's real chat template (tokenizer_config.json "chat_template") with Jinja2 the way
transformers does, and writes the results to chat_template_cases.json for the C++ test
(tests/tokenizer/chat_template_test.cpp), which must reproduce every string exactly.

Usage: python3 tests/data/make_chat_cases.py [--model ../shared/models/qwen3-0.6b]
"""
import argparse
import json
import os

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers replaces Jinja's HTML-escaping tojson with plain json.dumps.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def render(template, messages, tools=None, add_generation_prompt=True, enable_thinking=None):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    kwargs = {}
    if enable_thinking is not None:
        kwargs["enable_thinking"] = enable_thinking
    return env.from_string(template).render(messages=messages, tools=tools,
                                            add_generation_prompt=add_generation_prompt, **kwargs)


WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather for a city, e.g. \"Paris\".",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "unit": {"enum": ["c", "f"]}},
                   "required": ["city"]}}}

CASES = [
    ("one_user_turn", dict(messages=[{"role": "user", "content": "What is 2+2?"}])),
    ("system_and_user", dict(messages=[
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "Name a prime."}])),
    ("thinking_disabled", dict(messages=[{"role": "user", "content": "Hi!"}],
                               enable_thinking=False)),
    ("thinking_enabled_explicitly", dict(messages=[{"role": "user", "content": "Hi!"}],
                                         enable_thinking=True)),
    ("no_generation_prompt", dict(messages=[{"role": "user", "content": "Hi"}],
                                  add_generation_prompt=False)),
    ("multi_turn_think_stripped_before_last_query", dict(messages=[
        {"role": "system", "content": "Be helpful."},
        {"role": "user", "content": "What is 3*7?"},
        {"role": "assistant", "content": "<think>\n3 times 7 is 21.\n</think>\n\n21"},
        {"role": "user", "content": "And 4*5?"}])),
    ("assistant_last_keeps_think", dict(messages=[
        {"role": "user", "content": "What is 3*7?"},
        {"role": "assistant", "content": "<think>\nmultiply\n</think>\n\n21"}],
        add_generation_prompt=False)),
    ("assistant_last_without_think_gets_empty_block", dict(messages=[
        {"role": "user", "content": "Say hi"},
        {"role": "assistant", "content": "\n\nhi"}], add_generation_prompt=False)),
    ("reasoning_content_field", dict(messages=[
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1", "reasoning_content": "\nthought one\n"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2", "reasoning_content": "thought two"}],
        add_generation_prompt=False)),
    ("system_in_the_middle", dict(messages=[
        {"role": "user", "content": "a"}, {"role": "system", "content": "b"},
        {"role": "user", "content": "c"}], enable_thinking=False)),
    ("tool_role_and_tool_calls", dict(
        tools=[WEATHER_TOOL],
        messages=[
            {"role": "system", "content": "You can check the weather."},
            {"role": "user", "content": "Weather in Paris and Zürich?"},
            {"role": "assistant", "content": "<think>\nNeed two calls.\n</think>\n\nChecking.",
             "tool_calls": [
                 {"type": "function", "function": {"name": "get_weather",
                                                   "arguments": {"city": "Paris", "unit": "c"}}},
                 {"type": "function", "function": {"name": "get_weather",
                                                   "arguments": "{\"city\": \"Zürich\"}"}}]},
            {"role": "tool", "content": "{\"temp\": 18}"},
            {"role": "tool", "content": "{\"temp\": 12}"},
            {"role": "assistant", "content": "<think>\nsummarize\n</think>\n\nParis 18, Zürich 12."},
        ], add_generation_prompt=False)),
    ("tool_call_without_content_then_generation", dict(
        tools=[WEATHER_TOOL],
        messages=[
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": "",
             "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                              "arguments": {"city": "Oslo"}}}]},
            {"role": "tool", "content": "{\"temp\": -3}"}])),
    ("tools_without_system", dict(tools=[WEATHER_TOOL], messages=[{"role": "user", "content": "x"}],
                                  enable_thinking=False)),
    ("user_turn_wrapping_tool_response_is_not_a_query", dict(messages=[
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "<think>\nr1\n</think>\n\nx"},
        {"role": "user", "content": "<tool_response>\nok\n</tool_response>"},
        {"role": "assistant", "content": "<think>\nr2\n</think>\n\ny"}])),
    ("unicode_and_newlines", dict(messages=[
        {"role": "user", "content": "  héllo\n\n世界 😀  "}])),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.path.join(HERE, "..", "..", "..", "shared", "models",
                                                    "qwen3-0.6b"))
    ap.add_argument("--out", default=os.path.join(HERE, "chat_template_cases.json"))
    args = ap.parse_args()
    with open(os.path.join(args.model, "tokenizer_config.json"), encoding="utf-8") as f:
        template = json.load(f)["chat_template"]
    cases = []
    for name, kw in CASES:
        options = {"add_generation_prompt": kw.get("add_generation_prompt", True)}
        if kw.get("enable_thinking") is not None:
            options["enable_thinking"] = kw["enable_thinking"]
        cases.append({"name": name, "messages": kw["messages"], "tools": kw.get("tools") or [],
                      "options": options, "expected": render(template, **kw)})
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {args.out}")


if __name__ == "__main__":
    main()
