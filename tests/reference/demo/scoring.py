"""Scores demo-model replies against evaluation expectations (pure Python).

score(item, text, variant) judges one generated completion (the text the model
produced after the prompt, special tokens kept); summarize() aggregates the
per-metric percentages and compares them with TARGETS (the issue's quality bar).
variant is 'demo' (Qwen3 template, JSON tool calls; the model itself opens
<think>) or 'demo-xml' (Qwen3.5 template, XML tool calls; the prompt already
ends with '<think>\\n', so the model only closes the block).
"""

import json
import re

TARGETS = {"tool_fit": 95.0, "no_tool": 95.0, "add2": 90.0, "capital": 95.0, "think_format": 98.0}
STOPS = ("<|im_end|>", "<|endoftext|>")
METRIC_ORDER = ["tool_fit", "no_tool", "add2", "capital", "think_format", "tool_result", "followup_call",
                "sub2", "add3", "convert", "no_think_leak", "finished"]
DESCRIPTIONS = {
    "tool_fit": "tool fits -> parsable call, right function and argument values",
    "no_tool": "no offered tool fits -> plain answer",
    "add2": "2-digit addition (held-out pairs) correct",
    "capital": "capitals (held-out phrasings) correct",
    "think_format": "thinking on -> think block opened and closed before the answer",
    "tool_result": "after a tool result -> answer has temperature, city, condition",
    "followup_call": "multi-turn 'what about CITY?' -> get_weather(CITY)",
    "sub2": "2-digit subtraction correct",
    "add3": "3-digit addition correct",
    "convert": "unit conversion within 0.15",
    "no_think_leak": "thinking off -> no think tags generated",
    "finished": "reply ended with <|im_end|> within the token limit",
}


def split_reply(text):
    """Cuts generated text at the first end token: (body, finished)."""
    cut = min([i for i in (text.find(s) for s in STOPS) if i >= 0], default=-1)
    if cut < 0:
        return text, False
    return text[:cut], True


def parse_calls(answer, variant):
    """Tool calls in a reply: (calls, ok) with calls a list of (name, args dict).

    ok is False when a <tool_call> block is present but malformed.
    """
    if answer.count("<tool_call>") != answer.count("</tool_call>"):
        return [], False
    calls = []
    for inner in re.findall(r"<tool_call>(.*?)</tool_call>", answer, re.S):
        if variant == "demo":
            try:
                obj = json.loads(inner.strip())
                args = obj["arguments"]
                if isinstance(args, str):
                    args = json.loads(args)
                if not isinstance(obj["name"], str) or not isinstance(args, dict):
                    return calls, False
            except (ValueError, KeyError, TypeError):
                return calls, False
            calls.append((obj["name"], args))
        else:
            m = re.fullmatch(r"\s*<function=([^>\n]+)>\n(.*)</function>\s*", inner, re.S)
            if not m:
                return calls, False
            body, args = m.group(2), {}
            for p in re.finditer(r"<parameter=([^>\n]+)>\n(.*?)\n</parameter>\n?", body, re.S):
                args[p.group(1)] = p.group(2)
            if re.sub(r"<parameter=([^>\n]+)>\n(.*?)\n</parameter>\n?", "", body, flags=re.S).strip():
                return calls, False
            calls.append((m.group(1), args))
    return calls, True


def args_match(expected, got, tool):
    """Exact argument values; calculator expressions compare without whitespace."""
    if set(expected) != set(got):
        return False
    for k, v in expected.items():
        g = got[k] if isinstance(got[k], str) else json.dumps(got[k])
        if tool == "calculator" and k == "expression":
            if re.sub(r"\s+", "", g) != re.sub(r"\s+", "", v):
                return False
        elif g != v:
            return False
    return True


def _ints(s):
    return re.findall(r"-?\d+", s)


def score(item, text, variant):
    """Judges one completion; returns a dict with ok (metric pass), think_ok, leak, finished, answer."""
    body, finished = split_reply(text)
    thinking = item["thinking"]
    leak = None
    if thinking:
        if variant == "demo":
            think_ok = body.startswith("<think>\n") and body.count("<think>") == 1 and body.count("</think>") == 1
        else:
            think_ok = "<think>" not in body and body.count("</think>") == 1
        answer = body.split("</think>", 1)[1] if "</think>" in body else body
        think_ok = bool(think_ok and finished and answer.strip())
    else:
        think_ok = None
        leak = "<think>" in body or "</think>" in body
        answer = body
    answer = answer.strip()
    calls, parse_ok = parse_calls(answer, variant)
    has_call = "<tool_call>" in answer
    exp, metric = item["expect"], item["metric"]
    if metric in ("tool_fit", "followup_call"):
        ok = (parse_ok and len(calls) >= 1 and calls[0][0] == exp["tool"]
              and args_match(exp["args"], calls[0][1], exp["tool"]))
    elif metric == "no_tool":
        ok = not has_call and answer != ""
    elif metric in ("add2", "sub2", "add3"):
        nums = _ints(answer)
        ok = not has_call and bool(nums) and nums[-1] == exp["value"]
    elif metric == "capital":
        ok = not has_call and exp["capital"] in answer
    elif metric == "tool_result":
        ok = not has_call and exp["temp"] in _ints(answer) and exp["city"] in answer and exp["condition"] in answer
    elif metric == "convert":
        nums = re.findall(r"-?\d+(?:\.\d+)?", answer)
        ok = not has_call and bool(nums) and abs(float(nums[-1]) - float(exp["value"])) <= 0.15
    else:
        raise ValueError(f"unknown metric {metric}")
    return {"ok": bool(ok and finished), "think_ok": think_ok, "leak": leak, "finished": finished,
            "calls": calls, "answer": answer}


def summarize(items, results):
    """Per-metric {n, ok, pct, target, pass} over scored items, plus think_format, no_think_leak, finished."""
    out = {}

    def add(name, flag):
        d = out.setdefault(name, {"n": 0, "ok": 0})
        d["n"] += 1
        d["ok"] += int(bool(flag))

    for it, r in zip(items, results):
        add(it["metric"], r["ok"])
        if r["think_ok"] is not None:
            add("think_format", r["think_ok"])
        if r["leak"] is not None:
            add("no_think_leak", not r["leak"])
        add("finished", r["finished"])
    for name, d in out.items():
        d["pct"] = round(100.0 * d["ok"] / d["n"], 1) if d["n"] else 0.0
        if name in TARGETS:
            d["target"] = TARGETS[name]
            d["pass"] = d["pct"] >= TARGETS[name]
    return {k: out[k] for k in METRIC_ORDER if k in out}


def format_table(summary, title):
    """The metrics as a fixed-width text table."""
    lines = [title, f"{'metric':<15}{'n':>5}{'correct':>9}{'target':>8}  result  description"]
    for k, d in summary.items():
        tgt = f"{d['target']:.0f}%" if "target" in d else "-"
        res = ("PASS" if d["pass"] else "FAIL") if "pass" in d else ""
        lines.append(f"{k:<15}{d['n']:>5}{d['pct']:>8.1f}%{tgt:>8}  {res:<6}  {DESCRIPTIONS.get(k, '')}")
    return "\n".join(lines)
