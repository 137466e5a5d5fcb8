#!/usr/bin/env python3
"""Regenerates rendered.json: tool calls rendered by the real Qwen chat templates.

Each case is an assistant turn with tool calls, rendered by a template from
tests/testdata/chat-templates the way the model saw it in training; the parser
must give back the calls. Run from anywhere (needs jinja2):

    python3 engine/toolcall/testdata/render.py

It renders as transformers does: trim_blocks, lstrip_blocks, loopcontrols,
tojson without key sorting or HTML escaping.
"""
import json
import os
import re

import jinja2

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = os.path.join(HERE, "..", "..", "..", "tests", "testdata", "chat-templates")


def render(template_name, messages, tools):
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)

    def raise_exception(msg):
        raise jinja2.TemplateError(msg)

    env.globals["raise_exception"] = raise_exception
    with open(os.path.join(TEMPLATES, template_name), encoding="utf-8") as f:
        tpl = env.from_string(f.read())
    return tpl.render(messages=messages, tools=tools, add_generation_prompt=False)


def assistant_output(text):
    """The reply as the model generated it: after '<|im_start|>assistant\\n', before '<|im_end|>'."""
    m = re.search(r"<\|im_start\|>assistant\n(.*?)<\|im_end\|>", text, re.S)
    assert m, text
    return m.group(1)


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "write_file", "description": "Write a file.", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "configure", "description": "Typed parameters.", "parameters": {
        "type": "object", "properties": {
            "count": {"type": "integer"}, "ratio": {"type": "number"}, "enabled": {"type": "boolean"},
            "options": {"type": "object"}, "tags": {"type": "array"}, "nothing": {"type": ["string", "null"]},
            "label": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "list_files", "description": "No parameters.", "parameters": {
        "type": "object", "properties": {}}}},
]

CODE = ('package main\n\nimport "fmt"\n\n// <b>bold</b> & </parameter> in a comment\nfunc main() {\n'
        '\tif 1 < 2 {\n\t\tfmt.Println("</function>\\n")\n\t}\n}\n')

SCENARIOS = [
    ("weather", "", [("get_weather", {"city": "Paris"})]),
    ("weather_with_content", "Let me look up the weather in Paris.", [("get_weather", {"city": "Paris", "days": 3})]),
    ("parallel", "Checking both cities.", [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Zürich 🇨🇭"})]),
    ("code_file", "", [("write_file", {"path": "main.go", "content": CODE})]),
    ("multiline_edges", "", [("write_file", {"path": "notes.txt", "content": "\n  leading blank line and indent\n\ntrailing blank\n\n"})]),
    ("typed", "", [("configure", {"count": 7, "ratio": 2.5, "enabled": True, "options": {"nested": {"k": [1, 2, "}"]}, "z": None},
                                  "tags": ["a", "b c"], "nothing": None, "label": "0042"})]),
    ("typed_false", "", [("configure", {"enabled": False, "count": -3, "ratio": 1e-05, "tags": []})]),
    ("no_args", "", [("list_files", {})]),
    ("unicode", "天気を確認します。", [("get_weather", {"city": "東京 (Tōkyō)"})]),
    ("three_calls", "", [("list_files", {}), ("get_weather", {"city": "Lima"}), ("write_file", {"path": "a b.txt", "content": "x"})]),
]

TEMPLATE_FORMATS = [("Qwen-Qwen3-0.6B.jinja", "json"), ("Qwen3-Coder.jinja", "xml"), ("Qwen3.5-4B.jinja", "xml")]


def compact(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def main():
    cases = []
    for tname, fmt in TEMPLATE_FORMATS:
        for sname, content, calls in SCENARIOS:
            msg = {"role": "assistant", "content": content,
                   "tool_calls": [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls]}
            # A later user turn keeps the templates from adding a <think> block.
            messages = [{"role": "user", "content": "Hi"}, msg, {"role": "user", "content": "Thanks"}]
            out = assistant_output(render(tname, messages, TOOLS))
            cases.append({
                "name": "%s/%s" % (tname.replace(".jinja", ""), sname),
                "format": fmt,
                "tools": "rendered",
                "input": out,
                "content": content,
                "calls": [{"name": n, "arguments": compact(a)} for n, a in calls],
            })
    tools = [{"name": t["function"]["name"], "parameters": t["function"]["parameters"]} for t in TOOLS]
    doc = {"note": "generated by render.py from tests/testdata/chat-templates; do not edit",
           "tools": {"rendered": tools}, "cases": cases}
    with open(os.path.join(HERE, "rendered.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote %d cases" % len(cases))


if __name__ == "__main__":
    main()
