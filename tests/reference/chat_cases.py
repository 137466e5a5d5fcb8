#!/usr/bin/env python3
"""Reference renders of the Qwen chat templates, for engine/chat's parity tests.

Usage:
    python3 tests/reference/chat_cases.py OUTDIR            # transformers (GPU machine)
    python3 tests/reference/chat_cases.py OUTDIR --local    # plain jinja2 set up like transformers

Writes OUTDIR/chat_cases.json:
    {"generator": "...", "cases": [{"template", "name", "messages", "tools", "kwargs",
      "add_generation_prompt", "expected"} or {..., "error", "error_type"}]}
"template" is a path relative to tests/testdata. JSON keeps key order and the
int/float distinction (2 vs 2.0), which the Go side relies on.

Transformers mode renders with tokenizer.apply_chat_template(messages, tools=tools,
add_generation_prompt=..., tokenize=False, chat_template=<source>, **kwargs) on a
PreTrainedTokenizerFast built from the vendored Qwen3 tokenizer.json, and also renders
each case with the --local environment, reporting any difference (diagnostics only:
the transformers result is what gets written).

Copy the result to tests/testdata/chat/chat_cases.json.
Needs: python3, jinja2; transformers (+tokenizers) without --local. No network.
"""
import copy
import json
import os
import sys
import traceback
from datetime import datetime

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.normpath(os.path.join(HERE, "..", "testdata"))
TOKENIZER_DIR = os.path.join(TESTDATA, "qwen3-tokenizer")

TEMPLATES = [
    "qwen3-tokenizer/tokenizer_config.json",
    "chat-templates/Qwen-Qwen3-0.6B.jinja",
    "chat-templates/Qwen3-Coder.jinja",
    "chat-templates/Qwen3.5-4B.jinja",
]


def load_template(rel):
    path = os.path.join(TESTDATA, rel)
    with open(path, encoding="utf-8") as f:
        if rel.endswith(".json"):
            return json.load(f)["chat_template"]
        return f.read()


def special_tokens():
    with open(os.path.join(TOKENIZER_DIR, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    out = {}
    for k in ("bos_token", "eos_token", "unk_token", "pad_token"):
        v = cfg.get(k)
        if isinstance(v, dict):
            v = v.get("content")
        if v is not None:
            out[k] = v
    return out


# ---------------------------------------------------------------- conversations

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.\n  ",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "City name, e.g. \"Paris\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
            },
            "required": ["location"],
        },
    },
}

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_docs",
        "description": "Search the documentation index.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Free text – unicode ok: café, 東京"},
                "filters": {
                    "type": "object",
                    "description": "Optional filters",
                    "properties": {
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "score": {"type": "number", "minimum": 0.5},
                        "nested": {"type": "object", "properties": {"deep": {"type": ["string", "null"]}}},
                    },
                },
                "limit": {"type": "integer", "default": 10},
                "exact": {"type": "boolean"},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}

# A tool given as a bare function schema (no "function" wrapper).
BARE_TOOL = {
    "name": "calculator",
    "description": "Evaluate an arithmetic expression.",
    "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"]},
}

TOOLS = [WEATHER_TOOL, SEARCH_TOOL]

WEATHER_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": {"location": "Paris", "unit": "celsius", "days": 3}},
}

SEARCH_CALL = {
    "id": "call_2",
    "type": "function",
    "function": {
        "name": "search_docs",
        "arguments": {
            "query": "say \"hi\" – naïve café 😀",
            "filters": {"tags": ["a", "b"], "score": 2.5, "ratio": 2.0, "nested": {"deep": None, "ok": True}},
            "limit": 20,
            "exact": False,
            "empty_obj": {},
            "empty_list": [],
            "path": "C:\\temp\\x\ny",
        },
    },
}


def conversations():
    """(name, messages, tools, variants) where variants is a list of (suffix, kwargs, add_generation_prompt)."""
    gp = [("", {}, True)]
    think_variants = [("", {}, True), ("_think_off", {"enable_thinking": False}, True), ("_think_on", {"enable_thinking": True}, True)]
    return [
        ("single_user", [{"role": "user", "content": "Hello!"}], None, think_variants),
        ("single_user_no_prompt", [{"role": "user", "content": "Hello!"}], None, [("", {}, False)]),
        ("system_user", [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is 2+2?"},
        ], None, think_variants),
        ("multi_turn", [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": "Tell me a joke.\nA short one."},
        ], None, gp),
        ("multi_turn_end_assistant", [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
        ], None, [("", {}, False)]),
        ("reasoning_content_history", [
            {"role": "user", "content": "What is 17*3?"},
            {"role": "assistant", "content": "51", "reasoning_content": "17*3 = 51.\n"},
            {"role": "user", "content": "And 17*4?"},
            {"role": "assistant", "content": "68", "reasoning_content": "\n17*4 = 68."},
        ], None, [("", {}, False), ("_prompt", {}, True)]),
        ("inline_think_history", [
            {"role": "user", "content": "Q1"},
            {"role": "assistant", "content": "<think>\nfirst thoughts\n</think>\n\nA1"},
            {"role": "user", "content": "Q2"},
            {"role": "assistant", "content": "<think>\nsecond\n\n</think>\n\n\nA2"},
        ], None, [("", {}, False), ("_think_off", {"enable_thinking": False}, True)]),
        ("reasoning_none", [
            {"role": "user", "content": "Q"},
            {"role": "assistant", "content": "A", "reasoning_content": None},
            {"role": "user", "content": "Q2"},
        ], None, gp),
        ("tools_with_system", [
            {"role": "system", "content": "You can call tools."},
            {"role": "user", "content": "Weather in Paris?"},
        ], TOOLS, think_variants),
        ("tools_no_system", [{"role": "user", "content": "Find docs about café."}], TOOLS + [BARE_TOOL], gp),
        ("tool_call_roundtrip", [
            {"role": "user", "content": "Weather in Paris for 3 days?"},
            {"role": "assistant", "content": "", "tool_calls": [WEATHER_CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"},
            {"role": "assistant", "content": "It is 21.5°C and clear."},
            {"role": "user", "content": "Thanks!"},
        ], TOOLS, gp),
        ("tool_calls_parallel", [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "Weather and docs please"},
            {"role": "assistant", "content": "Let me check both.", "tool_calls": [WEATHER_CALL, SEARCH_CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_2", "content": "doc1\ndoc2"},
            {"role": "tool", "tool_call_id": "call_3", "content": "extra result <b>&</b>"},
        ], TOOLS, [("", {}, True), ("_think_off", {"enable_thinking": False}, True)]),
        ("tool_call_no_content", [
            {"role": "user", "content": "docs?"},
            {"role": "assistant", "content": None, "tool_calls": [SEARCH_CALL]},
            {"role": "tool", "content": "result"},
        ], TOOLS, gp),
        ("multi_step_tools", [
            {"role": "user", "content": "Plan a trip"},
            {"role": "assistant", "content": "<think>\nneed weather\n</think>\n\nChecking.", "tool_calls": [WEATHER_CALL]},
            {"role": "tool", "content": "rain"},
            {"role": "assistant", "content": "Searching docs.", "reasoning_content": "also docs", "tool_calls": [SEARCH_CALL]},
            {"role": "tool", "content": "none found"},
        ], TOOLS, [("", {}, True), ("_no_prompt", {}, False)]),
        ("user_looks_like_tool_response", [
            {"role": "user", "content": "real question"},
            {"role": "assistant", "content": "ok", "reasoning_content": "r"},
            {"role": "user", "content": "<tool_response>\nfake\n</tool_response>"},
        ], None, gp),
        ("content_text_parts", [
            {"role": "system", "content": [{"type": "text", "text": "System in parts."}]},
            {"role": "user", "content": [{"type": "text", "text": "Part one. "}, {"type": "text", "text": "Part two."}]},
        ], None, gp),
        ("content_image_parts", [
            {"role": "user", "content": [{"type": "image", "image": "file.png"}, {"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "video", "video": "v.mp4"}]},
        ], None, [("", {}, True), ("_vision_id", {"add_vision_id": True}, True)]),
        ("unicode_and_specials", [
            {"role": "system", "content": "Réponds en français. 日本語も OK. Emoji 🎉."},
            {"role": "user", "content": "Tabs\tand\\backslashes and \"quotes\" and 'single' and {{ braces }} {% tags %}"},
        ], None, gp),
        ("whitespace_content", [
            {"role": "user", "content": "  padded  \n\n"},
            {"role": "assistant", "content": "\n\n  answer with spaces  \n"},
            {"role": "user", "content": "next"},
        ], None, gp),
        ("arguments_not_json", [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": "not json {"}}]},
            {"role": "tool", "content": "x"},
        ], TOOLS, gp),
        ("custom_role", [
            {"role": "user", "content": "hi"},
            {"role": "developer", "content": "dev note"},
        ], None, gp),
        ("system_not_first", [
            {"role": "user", "content": "hi"},
            {"role": "system", "content": "late system"},
        ], None, gp),
        ("no_user_query", [
            {"role": "system", "content": "only system"},
        ], None, gp),
        ("empty_messages", [], None, gp),
        ("system_with_image", [
            {"role": "system", "content": [{"type": "image", "image": "x.png"}]},
            {"role": "user", "content": "hi"},
        ], None, gp),
        ("unexpected_content_item", [
            {"role": "user", "content": [{"type": "audio", "audio": "x.wav"}]},
        ], None, gp),
    ]


def build_cases():
    cases = []
    for rel in TEMPLATES:
        for name, messages, tools, variants in conversations():
            for suffix, kwargs, agp in variants:
                cases.append({
                    "template": rel,
                    "name": name + suffix,
                    "messages": messages,
                    "tools": tools,
                    "kwargs": kwargs,
                    "add_generation_prompt": agp,
                })
    return cases


# ---------------------------------------------------------------- renderers

def make_local_renderer():
    """jinja2 configured like transformers' _compile_jinja_template."""
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class AssistantTracker(jinja2.ext.Extension):
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

        def _generation_support(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    compiled = {}
    specials = special_tokens()

    def render(source, case):
        if source not in compiled:
            compiled[source] = env.from_string(source)
        kwargs = dict(specials)
        kwargs.update(case["kwargs"])
        return compiled[source].render(
            messages=copy.deepcopy(case["messages"]),
            tools=copy.deepcopy(case["tools"]),
            documents=None,
            add_generation_prompt=case["add_generation_prompt"],
            **kwargs,
        )

    return render, "local-jinja2 " + jinja2.__version__


def make_transformers_renderer():
    import transformers

    tok_file = os.path.join(TOKENIZER_DIR, "tokenizer.json")
    specials = special_tokens()
    tok = None
    errors = []
    try:
        from transformers import PreTrainedTokenizerFast

        tok = PreTrainedTokenizerFast(tokenizer_file=tok_file, **specials)
    except Exception as e:  # fall back to the directory loader
        errors.append("PreTrainedTokenizerFast: %r" % (e,))
        try:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR, local_files_only=True)
        except Exception as e2:
            errors.append("AutoTokenizer: %r" % (e2,))
    if tok is None:
        raise SystemExit("could not build a tokenizer: " + "; ".join(errors))
    print("tokenizer:", type(tok).__name__, "special tokens:", getattr(tok, "special_tokens_map", None), flush=True)

    def render(source, case):
        out = tok.apply_chat_template(
            copy.deepcopy(case["messages"]),
            tools=copy.deepcopy(case["tools"]),
            add_generation_prompt=case["add_generation_prompt"],
            tokenize=False,
            chat_template=source,
            **case["kwargs"],
        )
        if isinstance(out, list) and len(out) == 1 and isinstance(out[0], str):
            out = out[0]
        if not isinstance(out, str):
            raise RuntimeError("apply_chat_template returned %s, not str" % type(out).__name__)
        return out

    return render, "transformers " + transformers.__version__


def run_case(render, source, case):
    try:
        return {"expected": render(source, case)}
    except Exception as e:
        return {"error": str(e), "error_type": type(e).__name__}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    local = "--local" in sys.argv[1:]
    if len(args) != 1:
        raise SystemExit(__doc__)
    outdir = args[0]
    os.makedirs(outdir, exist_ok=True)

    sources = {rel: load_template(rel) for rel in TEMPLATES}
    local_render, local_name = make_local_renderer()
    if local:
        render, generator = local_render, local_name
    else:
        render, generator = make_transformers_renderer()
    print("generator:", generator, flush=True)

    cases = build_cases()
    out = []
    differ = 0
    for i, case in enumerate(cases):
        result = run_case(render, sources[case["template"]], case)
        if not local:
            ref = run_case(local_render, sources[case["template"]], case)
            if ref != result:
                differ += 1
                print("NOTE: transformers differs from local jinja2 for %s/%s:\n  transformers: %r\n  local:        %r"
                      % (case["template"], case["name"], result, ref), flush=True)
        entry = dict(case)
        entry.update(result)
        out.append(entry)
        status = "error: " + result["error"][:60] if "error" in result else "%d chars" % len(result["expected"])
        print("[%3d/%d] %s %s -> %s" % (i + 1, len(cases), case["template"], case["name"], status), flush=True)

    path = os.path.join(outdir, "chat_cases.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"generator": generator, "cases": out}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    # Read back to prove the int/float distinction survived.
    with open(path, encoding="utf-8") as f:
        back = json.load(f)
    assert back["cases"] == out, "round trip changed the cases"
    n_err = sum(1 for c in out if "error" in c)
    print("wrote %d cases (%d errors) to %s" % (len(out), n_err, path))
    if not local:
        print("%d case(s) differ between transformers and local jinja2" % differ)


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except Exception:
        traceback.print_exc()
        sys.exit(1)
