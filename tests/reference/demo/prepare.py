#!/usr/bin/env python3
"""Stage 1 of the demo-model recipe: corpus, tokenizer, tokenized training data.

  python3 prepare.py --work DIR

Generates the synthetic conversations (corpus.py), renders them through the two
real chat templates with transformers' apply_chat_template (Qwen3 for `demo`,
Qwen3.5 for `demo-xml`), trains one byte-level BPE tokenizer on the rendered
text whose normalizer, pre-tokenizer, post-processor and decoder are copied
verbatim from the real Qwen3 tokenizer.json, and writes to DIR:
  tokenizer.json             the trained tokenizer (added tokens after the vocabulary)
  data-demo.npz, data-demo-xml.npz
                             tokens (int32, all examples concatenated), trained
                             (uint8, 1 where the loss applies: assistant turns
                             through <|im_end|>), offsets (int64, n+1)
  eval_items.json            the held-out evaluation prompts
  prepare_stats.json         counts and checks
Needs transformers, tokenizers, numpy and jinja2; no torch GPU work.
"""

import argparse
import json
import multiprocessing as mp
import os
import re
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import corpus  # noqa: E402

T0 = time.time()
VARIANTS = ("demo", "demo-xml")
_G = {}  # state inherited by forked pool workers: corpus, renderers, tokenizer


def log(*a):
    print(f"[prepare {time.time() - T0:6.1f}s]", *a, flush=True)


def hf_renderers(root, templates):
    """Renderers that call transformers' apply_chat_template with each template.

    Any tokenizer object can render a template passed as chat_template; the real
    Qwen3 tokenizer in tests/testdata is used as that object.
    """
    from transformers import AutoTokenizer
    base = AutoTokenizer.from_pretrained(os.path.join(root, "tests/testdata/qwen3-tokenizer"))

    def make(template):
        def render(messages, tools, thinking, add_generation_prompt):
            out = base.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False,
                                           add_generation_prompt=add_generation_prompt, enable_thinking=thinking)
            if not isinstance(out, str):
                raise TypeError(f"apply_chat_template returned {type(out)}")
            return out
        return render
    return {v: make(templates[v]) for v in VARIANTS}


def cross_check(convs, hf, local):
    """Counts renderings where transformers and the local jinja2 environment differ (should be 0)."""
    diffs, first = 0, None
    for c in convs:
        for agp in (False, True):
            msgs = c["messages"] if not agp else c["messages"][:-1]
            if agp and msgs[-1]["role"] == "assistant":
                continue
            a = hf(msgs, c["tools"], c["thinking"], agp)
            b = local(msgs, c["tools"], c["thinking"], agp)
            if a != b:
                diffs += 1
                first = first or (a, b)
    return diffs, first


def _render_full(args):
    variant, lo, hi = args
    render = _G["render"][variant]
    out = []
    for c in _G["corpus"][lo:hi]:
        try:
            out.append(render(c["messages"], c["tools"], c["thinking"], False))
        except Exception:
            pass
    return out


def _pool_init(tok_json):
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread per forked worker
    if tok_json:
        from tokenizers import Tokenizer
        _G["tok"] = Tokenizer.from_str(tok_json)


def _encode_chunk(args):
    """Renders, segments and tokenizes conversations [lo, hi) of one variant."""
    variant, lo, hi = args
    render, tok = _G["render"][variant], _G["tok"]
    ids, trained, lens = [], [], []
    errors, checked, mismatched = 0, 0, 0
    for j, c in enumerate(_G["corpus"][lo:hi]):
        try:
            segs = corpus.segments(c, render)
        except Exception:  # counted and reported; one odd conversation must not sink the run
            errors += 1
            lens.append(0)
            continue
        encs = tok.encode_batch([t for t, _ in segs], add_special_tokens=False)
        n = 0
        one = []
        for (_, m), e in zip(segs, encs):
            one.extend(e.ids)
            trained.extend([1 if m else 0] * len(e.ids))
            n += len(e.ids)
        ids.extend(one)
        lens.append(n)
        if j % 20 == 0:  # the server tokenizes whole prompts: piecewise must equal whole-text tokenization
            checked += 1
            mismatched += tok.encode("".join(t for t, _ in segs), add_special_tokens=False).ids != one
    return (variant, lo, np.asarray(ids, np.int32), np.asarray(trained, np.uint8), np.asarray(lens, np.int64),
            errors, checked, mismatched)


# DEMO_SPLIT_WORDS=0 trains merges across a word's first character again (R5 and before).
SPLIT_WORDS = os.environ.get("DEMO_SPLIT_WORDS", "1") == "1"

ADDED_RE = re.compile("|".join(re.escape(t) for t, _ in corpus.ADDED_TOKENS))


def train_tokenizer(texts, vocab_total, real):
    """Trains the BPE and returns tokenizer.json text with Qwen3's exact pipeline sections."""
    from tokenizers import Tokenizer
    n_added = len(corpus.ADDED_TOKENS)
    model_meta = {k: v for k, v in real["model"].items() if k not in ("vocab", "merges")}
    skeleton = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
                "normalizer": real["normalizer"], "pre_tokenizer": real["pre_tokenizer"],
                "post_processor": real["post_processor"], "decoder": real["decoder"],
                "model": dict(model_meta, vocab={}, merges=[])}
    if SPLIT_WORDS:
        # Training only: letter runs are cut from the character before them, so
        # no merge joins a space, quote or slash to a word. The saved tokenizer
        # keeps Qwen3's pre-tokenizer; with no such merge learned, " Valencia"
        # encodes as "Ġ" + the tokens of "Valencia", the same pieces that a JSON
        # argument ("Valencia) or a path (/Valencia) holds, so copying a name the
        # user wrote is token-for-token. Before, the first pieces differed
        # ("ĠVal" vs "V","al") and the model misspelt unseen names when it copied
        # them (R3-R5: "Vulencia", "ltter_29.txt"; tool_fit 91-94%).
        pre = real["pre_tokenizer"]
        steps = list(pre["pretokenizers"]) if pre.get("type") == "Sequence" else [pre]
        at = next(i for i, st in enumerate(steps) if st.get("type") == "ByteLevel")
        steps.insert(at, {"type": "Split", "pattern": {"Regex": "\\p{L}+"}, "behavior": "Isolated", "invert": False})
        skeleton["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": steps}
    tok = Tokenizer.from_str(json.dumps(skeleton))
    from tokenizers import pre_tokenizers, trainers
    trainer = trainers.BpeTrainer(vocab_size=vocab_total - n_added, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    # Added-token strings are cut out so that no merges are spent on them.
    pieces = (p for t in texts for p in ADDED_RE.split(t) if p)
    tok.train_from_iterator(pieces, trainer=trainer)
    d = json.loads(tok.to_str())
    vocab = d["model"]["vocab"]
    merges = [m.split(" ") if isinstance(m, str) else list(m) for m in d["model"]["merges"]]
    base = len(vocab)
    assert sorted(vocab.values()) == list(range(base)), "BPE ids are not dense"
    out = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [{"id": base + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False, "special": sp} for i, (c, sp) in enumerate(corpus.ADDED_TOKENS)],
           "normalizer": real["normalizer"], "pre_tokenizer": real["pre_tokenizer"],
           "post_processor": real["post_processor"], "decoder": real["decoder"],
           "model": dict(model_meta, vocab=vocab, merges=merges)}
    text = json.dumps(out, ensure_ascii=False, indent=2)
    final = Tokenizer.from_str(text)
    for i, (c, _) in enumerate(corpus.ADDED_TOKENS):
        assert final.token_to_id(c) == base + i, c
    probe = "<|im_start|>user\nWhat's 47 + 38? Ünïcödé 東京 🙂<|im_end|>\n<think>\n\n</think>\n\n"
    enc = final.encode(probe, add_special_tokens=False)
    assert final.decode(enc.ids, skip_special_tokens=False) == probe, "tokenizer round trip failed"
    assert enc.ids[0] == base + 1 and base + 2 in enc.ids
    if SPLIT_WORDS:
        space = final.encode(" ", add_special_tokens=False).ids
        for w in ("Valencia", "letter_29.txt", "Durban", "goals"):
            bare = final.encode(w, add_special_tokens=False).ids
            for pre in (" ", '"', "/"):
                got = final.encode(pre + w, add_special_tokens=False).ids
                lead = final.encode(pre, add_special_tokens=False).ids
                if got != lead + bare:
                    log(f"WARN word split: {pre + w!r} -> {got}, expected {lead} + {bare}")
        log(f"word split probe: ' Valencia' -> {final.encode(' Valencia', add_special_tokens=False).ids} (space {space})")
    return text, base


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--n", type=int, default=200000, help="training conversations")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--vocab", type=int, default=4096, help="tokenizer size including added tokens")
    ap.add_argument("--max-len", type=int, default=1280, help="drop longer examples")
    ap.add_argument("--bpe-sample", type=int, default=12000, help="conversations per variant for BPE training")
    ap.add_argument("--procs", type=int, default=0)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    root = corpus.repo_root()
    procs = a.procs or max(2, min(16, (os.cpu_count() or 4) - 2))
    stats = {"seed": a.seed, "n_conversations": a.n}

    templates = corpus.load_templates(root)
    local = {v: corpus.local_renderer(templates[v]) for v in VARIANTS}
    with open(os.path.join(root, "tests/testdata/qwen3-tokenizer/tokenizer.json"), encoding="utf-8") as f:
        real = json.load(f)

    convs = corpus.make_corpus(a.seed, a.n)
    items = corpus.make_eval(a.seed)
    with open(os.path.join(a.work, "eval_items.json"), "w", encoding="utf-8") as f:
        json.dump(items, f, ensure_ascii=False)
    stats["kinds"] = {}
    for c in convs:
        stats["kinds"][c["kind"]] = stats["kinds"].get(c["kind"], 0) + 1
    log(f"generated {len(convs)} conversations, {len(items)} eval items; {procs} worker processes")

    try:
        render = hf_renderers(root, templates)
        stats["renderer"] = "transformers.apply_chat_template"
        for v in VARIANTS:
            diffs, first = cross_check(convs[:300], render[v], local[v])
            stats[f"render_diffs_vs_local_{v}"] = diffs
            log(f"[{v}] transformers vs local jinja2 renderings that differ: {diffs} of ~600")
            if first:
                log("WARN first difference:\n--- transformers ---\n" + first[0][-600:] + "\n--- local ---\n" + first[1][-600:])
        # Also check that each eval item's gold reply is a continuation of its prompt under transformers.
        for v in VARIANTS:
            for it in items[:50]:
                corpus.completion_of(it, render[v])
    except Exception as e:  # keep going with the identical local environment rather than lose the run
        log(f"WARN transformers rendering failed ({type(e).__name__}: {e}); using the local jinja2 renderer")
        render = local
        stats["renderer"] = "local jinja2 (transformers failed)"
    _G["corpus"], _G["render"] = convs, render

    ctx = mp.get_context("fork")
    k = min(a.bpe_sample, len(convs))
    step = max(1, k // (procs * 4))
    with ctx.Pool(procs, initializer=_pool_init, initargs=(None,)) as pool:
        jobs = [(v, lo, min(lo + step, k)) for v in VARIANTS for lo in range(0, k, step)]
        texts = [t for chunk in pool.map(_render_full, jobs) for t in chunk]
    log(f"rendered {len(texts)} texts ({sum(map(len, texts)) / 1e6:.1f} MB) for BPE training")
    tok_json, base = train_tokenizer(texts, a.vocab, real)
    with open(os.path.join(a.work, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(tok_json)
    stats["bpe_vocab"], stats["tokenizer_size"] = base, base + len(corpus.ADDED_TOKENS)
    log(f"tokenizer: {base} BPE tokens + {len(corpus.ADDED_TOKENS)} added = {base + len(corpus.ADDED_TOKENS)}")
    del texts

    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # forked workers each tokenize on one thread
    step = max(1, len(convs) // (procs * 8))
    jobs = [(v, lo, min(lo + step, len(convs))) for v in VARIANTS for lo in range(0, len(convs), step)]
    parts = {v: [] for v in VARIANTS}
    errors = checked = mismatched = 0
    with ctx.Pool(procs, initializer=_pool_init, initargs=(tok_json,)) as pool:
        for n_done, res in enumerate(pool.imap_unordered(_encode_chunk, jobs), 1):
            v, lo, ids, tr, lens, e, ch, mm = res
            parts[v].append((lo, ids, tr, lens))
            errors, checked, mismatched = errors + e, checked + ch, mismatched + mm
            if n_done % max(1, len(jobs) // 8) == 0:
                log(f"tokenized {n_done}/{len(jobs)} chunks")
    stats["segment_errors"], stats["whole_vs_piecewise_checked"], stats["whole_vs_piecewise_mismatch"] = errors, checked, mismatched
    log(f"segmentation errors: {errors}; piecewise vs whole-text tokenization mismatches: {mismatched} of {checked}")
    if mismatched:
        log("WARN piecewise tokenization differs from whole-text tokenization for some examples")

    for v in VARIANTS:
        parts[v].sort(key=lambda p: p[0])
        ids = np.concatenate([p[1] for p in parts[v]])
        tr = np.concatenate([p[2] for p in parts[v]])
        lens = np.concatenate([p[3] for p in parts[v]])
        offsets = np.concatenate([[0], np.cumsum(lens)])
        keep = (lens > 0) & (lens <= a.max_len)
        sel = np.nonzero(keep)[0]
        new_ids = np.concatenate([ids[offsets[i]:offsets[i + 1]] for i in sel])
        new_tr = np.concatenate([tr[offsets[i]:offsets[i + 1]] for i in sel])
        new_off = np.concatenate([[0], np.cumsum(lens[sel])]).astype(np.int64)
        assert new_ids.max() < base + len(corpus.ADDED_TOKENS)
        np.savez(os.path.join(a.work, f"data-{v}.npz"), tokens=new_ids, trained=new_tr, offsets=new_off)
        s = {"examples": int(len(sel)), "dropped_too_long": int(((lens > a.max_len)).sum()),
             "tokens": int(len(new_ids)), "trained_tokens": int(new_tr.sum()),
             "mean_len": round(float(lens[sel].mean()), 1), "max_len": int(lens[sel].max())}
        stats[v] = s
        log(f"[{v}] {s}")
    with open(os.path.join(a.work, "prepare_stats.json"), "w") as f:
        json.dump(stats, f, indent=2)
    log("done")


if __name__ == "__main__":
    main()
