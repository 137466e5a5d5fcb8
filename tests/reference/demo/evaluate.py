#!/usr/bin/env python3
"""Greedy evaluation of a saved demo model on the held-out prompts.

  python3 evaluate.py --model DIR --items eval_items.json --variant demo|demo-xml [--out eval.json]

The model and tokenizer are loaded from the saved files with transformers
(AutoModelForCausalLM, AutoTokenizer), prompts are rendered with the saved chat
template (apply_chat_template, add_generation_prompt, enable_thinking), and
replies are decoded greedily in left-padded batches with a KV cache. Scores
come from scoring.py; the result dict is also written as JSON.
"""

import argparse
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import corpus  # noqa: E402
import scoring  # noqa: E402


def _forward(model, **kw):
    """model(**kw) asking for last-position logits only where the API allows it."""
    try:
        return model(logits_to_keep=1, **kw)
    except TypeError:
        return model(**kw)


@torch.no_grad()
def greedy_batch(model, prompts, pad_id, stop_ids, max_new, device):
    """Greedy continuations of token-id prompts (left-padded batch, KV cache).

    Returns one list per prompt: generated ids up to and including the first
    stop id (or max_new ids when none came).
    """
    b, width = len(prompts), max(map(len, prompts))
    inp = torch.full((b, width), pad_id, dtype=torch.long)
    am = torch.zeros((b, width), dtype=torch.long)
    for r, p in enumerate(prompts):
        inp[r, width - len(p):] = torch.tensor(p, dtype=torch.long)
        am[r, width - len(p):] = 1
    inp, am = inp.to(device), am.to(device)
    pos = (am.cumsum(-1) - 1).clamp(min=0)
    out = _forward(model, input_ids=inp, attention_mask=am, position_ids=pos, use_cache=True)
    past, logits = out.past_key_values, out.logits[:, -1, :]
    next_pos = pos[:, -1:] + 1
    stop = torch.tensor(stop_ids, device=device)
    done = torch.zeros(b, dtype=torch.bool, device=device)
    gen = []
    for _ in range(max_new):
        tok = logits.float().argmax(-1)
        tok = torch.where(done, torch.full_like(tok, pad_id), tok)
        gen.append(tok)
        done |= torch.isin(tok, stop)
        if bool(done.all()):
            break
        am = torch.cat([am, torch.ones((b, 1), dtype=am.dtype, device=device)], 1)
        out = _forward(model, input_ids=tok[:, None], attention_mask=am, position_ids=next_pos,
                       past_key_values=past, use_cache=True)
        past, logits = out.past_key_values, out.logits[:, -1, :]
        next_pos = next_pos + 1
    rows = torch.stack(gen, 1).cpu().tolist()
    res = []
    for row in rows:
        seq = []
        for x in row:
            seq.append(x)
            if x in stop_ids:
                break
        res.append(seq)
    return res


@torch.no_grad()
def greedy_nocache(model, prompt, stop_ids, max_new, device):
    """Reference greedy decoding by full recomputation (slow; used for a consistency check)."""
    ids = list(prompt)
    out = []
    for _ in range(max_new):
        logits = model(input_ids=torch.tensor([ids], device=device), use_cache=False).logits[0, -1]
        x = int(logits.float().argmax())
        out.append(x)
        ids.append(x)
        if x in stop_ids:
            break
    return out


def load(model_dir, device):
    """Tokenizer and bf16 model from a saved directory."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model_dir)
    try:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    except TypeError:
        model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.bfloat16)
    return tok, model.to(device).eval()


def run(model_dir, items, variant, log=print, deadline=None, model=None, batch_size=128, max_new=300):
    """Evaluates; returns the result dict (metrics, checks, samples, failures).

    model: an already loaded model to use instead of the saved one (fallback).
    """
    from tokenizers import Tokenizer
    t0 = time.time()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    raw = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    checks = {}
    hf_tok = None
    if model is None:
        hf_tok, model = load(model_dir, device)
        checks["loaded_from"] = "saved files"
    else:
        checks["loaded_from"] = "in-memory model (loading the saved files failed)"
        try:
            from transformers import AutoTokenizer
            hf_tok = AutoTokenizer.from_pretrained(model_dir)
        except Exception as e:
            log(f"WARN AutoTokenizer failed ({e}); rendering with the local jinja2 environment")
    with open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        local = corpus.local_renderer(json.load(f)["chat_template"])
    stop_ids = [raw.token_to_id("<|im_end|>"), raw.token_to_id("<|endoftext|>")]
    pad_id = raw.token_to_id("<|endoftext|>")

    prompts, mism, tdiff = [], 0, 0
    for it in items:
        ltext = local(it["messages"], it["tools"], it["thinking"], True)
        if hf_tok is not None:
            text = hf_tok.apply_chat_template(it["messages"], tools=it["tools"], add_generation_prompt=True,
                                              enable_thinking=it["thinking"], tokenize=False)
            tdiff += text != ltext
        else:
            text = ltext
        ids = raw.encode(text, add_special_tokens=False).ids
        if hf_tok is not None and len(prompts) < 200:
            hf_ids = hf_tok(text, add_special_tokens=False)["input_ids"]
            mism += list(hf_ids) != ids
        prompts.append(ids)
    checks["hf_vs_raw_tokenizer_mismatch_of_200"] = int(mism)
    checks["hf_vs_local_template_render_diffs"] = int(tdiff)
    log(f"eval: {len(items)} prompts rendered with the saved chat template ({tdiff} differ from local jinja2); "
        f"transformers vs tokenizers encodings differ for {mism} of 200")

    # Consistency: KV-cache decoding vs full recomputation, and batched vs single.
    probe = list(range(0, len(items), max(1, len(items) // 6)))[:6]
    single = {i: greedy_batch(model, [prompts[i]], pad_id, stop_ids, 48, device)[0] for i in probe}
    nocache_ok = sum(greedy_nocache(model, prompts[i], stop_ids, 48, device) == single[i] for i in probe[:3])
    checks["cache_vs_nocache_agree"] = f"{nocache_ok}/3"
    batched = greedy_batch(model, [prompts[i] for i in probe], pad_id, stop_ids, 48, device)
    checks["batched_vs_single_agree"] = f"{sum(batched[k] == single[i] for k, i in enumerate(probe))}/{len(probe)}"
    log(f"eval checks: {checks}")

    order = sorted(range(len(items)), key=lambda i: len(prompts[i]))
    outs = [None] * len(items)
    for s in range(0, len(order), batch_size):
        if deadline and time.time() > deadline:
            log("WARN eval deadline reached; remaining prompts are not scored")
            break
        idx = order[s:s + batch_size]
        for i, seq in zip(idx, greedy_batch(model, [prompts[i] for i in idx], pad_id, stop_ids, max_new, device)):
            outs[i] = raw.decode(seq, skip_special_tokens=False)
    done = [i for i in range(len(items)) if outs[i] is not None]
    results = [scoring.score(items[i], outs[i], variant) for i in done]
    summary = scoring.summarize([items[i] for i in done], results)
    cover = f"{len(done)}" if len(done) == len(items) else f"{len(done)} of {len(items)} (deadline)"
    table = scoring.format_table(summary, f"== {variant}: greedy eval on {cover} held-out prompts")
    failures, samples = [], []
    seen_f, seen_s = {}, {}
    for i, r in zip(done, results):
        it = items[i]
        rec = {"metric": it["metric"], "thinking": it["thinking"], "tools": [t["function"]["name"] for t in it["tools"] or []],
               "last_message": it["messages"][-1]["content"], "expect": it["expect"], "reply": outs[i]}
        m = it["metric"]
        bad = not r["ok"] or r["think_ok"] is False or r["leak"]
        if bad and seen_f.get(m, 0) < 6:
            seen_f[m] = seen_f.get(m, 0) + 1
            failures.append(rec)
        if not bad and seen_s.get(m, 0) < 2:
            seen_s[m] = seen_s.get(m, 0) + 1
            samples.append(rec)
    met = all(d.get("pass", True) for d in summary.values()) and len(done) == len(items)
    return {"variant": variant, "metrics": summary, "targets": scoring.TARGETS, "all_targets_met": met,
            "n_items": len(items), "n_scored": len(done), "checks": checks,
            "eval_seconds": round(time.time() - t0, 1), "table": table, "samples": samples, "failures": failures}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--items", required=True)
    ap.add_argument("--variant", required=True, choices=["demo", "demo-xml"])
    ap.add_argument("--out")
    a = ap.parse_args()
    with open(a.items, encoding="utf-8") as f:
        items = json.load(f)
    res = run(a.model, items, a.variant)
    print(res["table"])
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(res, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
