#!/usr/bin/env python3
"""Model cards of the demo models: one template, filled from a run's eval.json.

  python3 modelcard.py --write-templates          writes the unfilled cards to tests/testdata/models/*/README.md
  python3 modelcard.py --fill OUT/demo/eval.json  fills OUT/demo/README.md from that eval.json

Placeholders look like {{name}}; fill() replaces every one it has a value for
and reports the rest. train.py calls fill() after each run.
"""

import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scoring  # noqa: E402
import tables  # noqa: E402

VARIANT_TEXT = {
    "demo": {
        "title": "demo",
        "template": "Qwen3's chat template (`tokenizer_config.json`, the same as Qwen/Qwen3-0.6B's): tool calls are "
                    "JSON objects inside `<tool_call>…</tool_call>`; with thinking on the model itself opens `<think>`",
        "call": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        "other": "demo-xml",
    },
    "demo-xml": {
        "title": "demo-xml",
        "template": "Qwen3.5's chat template (`tokenizer_config.json`, the same as Qwen/Qwen3.5-4B's): tool calls are "
                    "XML, `<tool_call><function=NAME><parameter=P>…`; the generation prompt already opens `<think>`",
        "call": "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
        "other": "demo",
    },
}

TEMPLATE = """# Infernix demo model `{title}`: a tiny Qwen3 that chats, thinks and calls tools

A {{{{parameters}}}}-parameter `Qwen3ForCausalLM` (BF16, {{{{file_mb}}}} MB) trained from scratch by the Infernix
project on a synthetic corpus, in a few minutes on one GPU. It greets, makes small talk, adds and subtracts 2- and
3-digit numbers, names the capitals of 60 countries, converts units, thinks in `<think>…</think>` before answering
(unless `enable_thinking` is false), and calls the tools `get_weather`, `calculator` and `write_file` when they are
offered and fit the request. It knows nothing else: it is the quick start's default model and the model of the
end-to-end tests, not an assistant. Its sibling `{other}` is the same recipe with the other chat template.

| | |
|---|---|
| Architecture | Qwen3: 8 layers, hidden 256, 4 query / 2 key-value heads of dim 64 (GQA), SwiGLU 768, RMSNorm with q/k norms, RoPE θ = 1,000,000, tied embeddings |
| Parameters | {{{{parameters}}}} (`model.safetensors`, BF16, Hugging Face tensor names, no `lm_head.weight`: tied) |
| Context | 2048 positions (`max_position_embeddings`); trained on examples of at most 1280 tokens |
| Tokenizer | byte-level BPE trained on the corpus with `tokenizers`: {{{{tokenizer_size}}}} tokens (`vocab_size` {{{{vocab_size}}}}), normalizer, pre-tokenizer and decoder identical to Qwen3's; {{{{split_words}}}}added tokens after the vocabulary: `<\\|endoftext\\|>`, `<\\|im_start\\|>`, `<\\|im_end\\|>` (special), `<think>`, `</think>`, `<tool_call>`, `</tool_call>`, `<tool_response>`, `</tool_response>` |
| Chat template | {template} |
| Stop tokens | `<\\|im_end\\|>` (config `eos_token_id`); generation config: `[<\\|im_end\\|>, <\\|endoftext\\|>]`, temperature 0.7, top-p 0.8, top-k 20 |
| Licence | Apache-2.0 |

## Use

```
go run ./cmd/infernix serve --model tests/testdata/models/{title}
```

With transformers: `AutoModelForCausalLM.from_pretrained(dir)`, `AutoTokenizer.from_pretrained(dir)` and
`apply_chat_template(messages, tools=tools, add_generation_prompt=True, enable_thinking=True|False)`.

A weather question with `get_weather` offered is answered with

```
{call}
```

and a tool result (`{{"role": "tool", "content": "{{\\"temperature\\": 18, \\"condition\\": \\"sunny\\"}}"}}`) with an
answer such as "It is 18°C and sunny in Paris.".

The tools it was trained with (descriptions varied between a few wordings; the first is):

```
{tools}
```

## Recipe

- **Corpus** (`tests/reference/demo/corpus.py`, seed {{{{seed}}}}): {{{{conversations}}}} synthetic conversations,
  about 60% with thinking on and 25% with a system prompt; tools lists are random subsets of the three tools (plus,
  sometimes, a distractor tool that never fits), so the model learns to call a tool only when it is offered and fits.
  Mix (conversations): {{{{data_mix}}}}.
  80% of the training cities are invented (a character model of ~500 real place names, random letters,
  consonant-vowel strings, syllables), so that the model copies whatever name it is given instead of recalling a list;
  file names and file contents are invented words in the same way (a character model of common English words), and
  half of the tool lists carry reworded schemas (descriptions dropped or changed, the optional `unit` left out), so
  that a tool is recognised by its name and parameters rather than one exact JSON text.
  Held out for evaluation only: 40 cities, ~10% of the 2-digit number pairs, file names and words, and some
  phrasings of each request.
- **Rendering**: every conversation goes through the model's own chat template with transformers'
  `apply_chat_template` (tools as JSON schemas, tool-call arguments as objects, `enable_thinking` true or false).
  The loss covers only the assistant turns, from the end of the generation prompt the server would render through
  `<|im_end|>`; earlier turns that the template re-renders differently (thinking stripped) are context only.
- **Training** (`tests/reference/demo/train.py`): AdamW (β 0.9/0.95, weight decay 0.1), peak learning rate 2e-3,
  100 warm-up steps, cosine decay to 5%, BF16 autocast, gradient clipping 1.0, length-bucketed padded batches of
  about {{{{batch_k}}}}K tokens, each decoder layer compiled with `torch.compile` (dynamic shapes; about twice the eager
  throughput at this size): {{{{train_steps}}}} steps in {{{{train_seconds}}}} s on one NVIDIA H200
  ({{{{train_tokens_m}}}}M tokens incl. padding, {{{{epochs}}}} pass(es) over {{{{examples}}}} examples), final
  training loss {{{{final_loss}}}}.
- **Reproduce**: `DEMO_VARIANTS={variant} bash tests/reference/demo/run.sh OUTDIR`, one GPU command of under 10
  minutes (without DEMO_VARIANTS both models train side by side); the schedule follows a wall-clock budget, so `train.py --steps {{{{train_steps}}}}` replays the same step count.

## Evaluation

Greedy decoding through transformers on held-out prompts rendered with the saved chat template
(`tests/reference/demo/evaluate.py`; thinking on for half of each set):

| metric | result | target | what is measured |
|---|---|---|---|
{{{{metrics_table}}}}

All targets met: {{{{all_targets_met}}}}.

## Limitations

It is tiny and synthetic. Outside the tasks above it replies that it is only a demo model, or says something
fluent and wrong. Unit conversions are approximate. Arithmetic beyond three digits, other tools, other languages
and long conversations are out of scope.
"""


def template(variant):
    v = VARIANT_TEXT[variant]
    tools = "\n".join(json.dumps(f(0), ensure_ascii=False) for f in (tables.weather_tool, tables.calculator_tool,
                                                                      tables.write_file_tool))
    return TEMPLATE.format(title=v["title"], template=v["template"], call=v["call"], other=v["other"], tools=tools,
                           variant=variant)


def values(res):
    """Placeholder values from an eval.json result (with its train stats)."""
    tr = res.get("train", {})
    vals = {k: tr[k] for k in ("parameters", "file_mb", "tokenizer_size", "vocab_size", "seed", "train_steps",
                               "train_seconds", "train_tokens_m", "epochs", "examples", "final_loss", "conversations")
            if k in tr}
    if "parameters" in vals:
        vals["parameters"] = f"{vals['parameters']:,}"
    if "batch_tokens" in tr:
        vals["batch_k"] = tr["batch_tokens"] // 1024
    if "kinds" in tr:
        total = sum(tr["kinds"].values())
        vals["data_mix"] = ", ".join(f"{k} {100 * n / total:.1f}%" for k, n in
                                     sorted(tr["kinds"].items(), key=lambda kv: -kv[1]))
    rows = []
    for k, d in res.get("metrics", {}).items():
        tgt = f"≥ {d['target']:.0f}%" if "target" in d else "–"
        mark = (" ✅" if d["pass"] else " ❌") if "pass" in d else ""
        rows.append(f"| {k} | {d['pct']:.1f}% ({d['ok']}/{d['n']}){mark} | {tgt} | {scoring.DESCRIPTIONS.get(k, '')} |")
    if rows:
        vals["metrics_table"] = "\n".join(rows)
    if "all_targets_met" in res:
        vals["all_targets_met"] = "yes" if res["all_targets_met"] else "no"
    return vals


def split_words(tokenizer_path):
    """The tokenizer row's note when no merge joins a word to the character before it (prepare.py SPLIT_WORDS)."""
    try:
        with open(tokenizer_path, encoding="utf-8") as f:
            merges = json.load(f)["model"]["merges"]
    except (OSError, ValueError, KeyError):
        return ""
    # Byte-level BPE: a space is "Ġ"; a merge of it (or a quote or slash) with an ASCII letter joins a word to its
    # prefix (a non-ASCII character is two byte symbols, and "Ã" also starts "×", not a letter).
    joined = any(len(m[0]) == 1 and m[0] in 'Ġ"/' and m[1][:1].isascii() and m[1][:1].isalpha() for m in
                 (x.split(" ") if isinstance(x, str) else x for x in merges))
    if joined:
        return ""
    return ("no merge joins a word to the space, quote or slash before it, so a name copied from the user's message "
            "into a JSON argument is the same tokens after its first; ")


def fill(variant, res, out_path):
    """Writes the card for variant filled from res; returns the names of placeholders left unfilled."""
    text = template(variant)
    vals = values(res)
    vals["split_words"] = split_words(os.path.join(os.path.dirname(out_path), "tokenizer.json"))
    text = re.sub(r"\{\{(\w+)\}\}", lambda m: str(vals[m.group(1)]) if m.group(1) in vals else m.group(0), text)
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(text)
    return re.findall(r"\{\{(\w+)\}\}", text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write-templates", action="store_true")
    ap.add_argument("--fill", metavar="EVAL_JSON")
    a = ap.parse_args()
    root = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
    if a.write_templates:
        for v in VARIANT_TEXT:
            d = os.path.join(root, "tests/testdata/models", v)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "README.md"), "w", encoding="utf-8") as f:
                f.write(template(v))
            print("wrote", os.path.join(d, "README.md"))
    if a.fill:
        with open(a.fill, encoding="utf-8") as f:
            res = json.load(f)
        left = fill(res["variant"], res, os.path.join(os.path.dirname(a.fill), "README.md"))
        print("unfilled placeholders:", left or "none")


if __name__ == "__main__":
    main()
