#!/usr/bin/env python3
"""Reference sampling distributions from Hugging Face transformers.

Writes OUT_DIR/hf_reference.json: for a set of small logit vectors and
sampling parameters, the probability of every token after the transformers
logits processors (RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper,
TopKLogitsWarper, TopPLogitsWarper, MinPLogitsWarper, in generate()'s order),
with logit bias and OpenAI presence/frequency penalties applied as vLLM does
(transformers has no such processors), plus torch's log_softmax of the raw
logits. engine/sample's TestHFReference compares the Go sampler with it.

Usage: python3 hf_reference.py OUT_DIR        (needs torch + transformers)
       python3 hf_reference.py --dry-run OUT_DIR   (case generation only)

Cases are drawn so that no top-p or min-p decision lies within 1e-4 of its
threshold (float32 rounding cannot flip it), and top-p cases have no tied
logits (torch.sort does not order ties by id, so a tie at the top-p
boundary is resolved arbitrarily).
"""
import json
import math
import os
import random
import sys

SEED = 20240601
N_CASES = 64
MARGIN = 1e-4


def q(x, step):
    return round(x / step) * step


def make_logits(rng, v, ties):
    # Multiples of 1/8 (ties) or 1/1024 (distinct, de-duplicated): exact in
    # float32 and in JSON.
    step = 0.125 if ties else 1.0 / 1024
    out, seen = [], set()
    while len(out) < v:
        x = rng.gauss(0, 2.5)
        if rng.random() < 0.05:
            x += rng.uniform(4, 10)
        x = q(x, step)
        if not ties and x in seen:
            continue
        seen.add(x)
        out.append(x)
    if rng.random() < 0.3:
        out[rng.randrange(v)] = -math.inf  # a masked token
    return out


def adjust(logits, p):
    """Bias, repetition, frequency, presence: float64 approximation used only
    for the margin checks (the real reference is computed in torch)."""
    l = list(logits)
    for tid, b in p["logit_bias"].items():
        l[int(tid)] += b
    rep = p["repetition_penalty"]
    if rep != 1:
        for t in set(p["prompt"]) | set(p["output"]):
            l[t] = l[t] / rep if l[t] > 0 else l[t] * rep
    counts = {}
    for t in p["output"]:
        counts[t] = counts.get(t, 0) + 1
    for t, c in counts.items():
        l[t] = l[t] - p["frequency_penalty"] * c - p["presence_penalty"]
    return l


def safe(logits, p):
    """True if no top-p/min-p decision is within MARGIN of its threshold."""
    if p["temperature"] < 1e-5:
        # Exact ties are fine (both sides take the lowest id); near ties
        # could flip between float64 here and float32 there.
        l = sorted(adjust(logits, p), reverse=True)
        return len(l) < 2 or l[0] == l[1] or l[0] - l[1] > MARGIN
    l = [x / p["temperature"] for x in adjust(logits, p)]
    order = sorted(range(len(l)), key=lambda i: -l[i])
    if p["top_p"] < 1:
        # Bias and penalties can make two logits (near-)equal: their order
        # at the top-p boundary would then be arbitrary in torch.sort.
        finite = sorted(x for x in l if x > -math.inf)
        if any(b - a < 1e-6 for a, b in zip(finite, finite[1:])):
            return False
    k = p["top_k"]
    keep = len(l)
    if 0 < k < len(l):
        kth = l[order[k - 1]]
        keep = sum(1 for x in l if x >= kth)
    m = l[order[0]]
    w = [math.exp(l[i] - m) if l[i] > -math.inf else 0.0 for i in order[:keep]]
    z = sum(w)
    n = keep
    if p["top_p"] < 1:
        cum = 0.0
        for j, x in enumerate(w):
            cum += x
            if abs(cum / z - p["top_p"]) < MARGIN:
                return False
            if cum / z >= p["top_p"] and n == keep:
                n = j + 1
        # min-p applies to the top-p survivors, renormalised
        w = w[:n]
    if p["min_p"] > 0:
        for x in w:
            if abs(x - p["min_p"]) < MARGIN:
                return False
    return True


def make_case(rng, i):
    ties = i % 4 == 3
    v = rng.randint(8, 160)
    logits = make_logits(rng, v, ties)
    p = {
        "temperature": rng.choice([0.0, 0.3, 0.7, 1.0, 1.0, 1.5]),
        "top_k": rng.choice([0, 0, 1, 5, 20, v // 2, v + 3]),
        "top_p": 1.0 if ties else rng.choice([1.0, 1.0, 0.5, 0.8, 0.95]),
        "min_p": rng.choice([0.0, 0.0, 0.05, 0.2]),
        "repetition_penalty": rng.choice([1.0, 1.0, 1.3, 0.8]),
        "presence_penalty": rng.choice([0.0, 0.0, 0.5, -0.5]),
        "frequency_penalty": rng.choice([0.0, 0.0, 0.25, 1.0]),
        "logit_bias": {},
        "prompt": [rng.randrange(v) for _ in range(rng.randint(0, 6))],
        "output": [rng.randrange(v) for _ in range(rng.randint(0, 6))],
    }
    if rng.random() < 0.3:
        p["logit_bias"] = {str(rng.randrange(v)): rng.choice([-100.0, -2.5, 3.0, 7.5])}
    return {"name": "case%02d%s" % (i, "_ties" if ties else ""), "logits": logits, "params": p}


def gen_cases():
    rng = random.Random(SEED)
    cases = []
    i = 0
    while len(cases) < N_CASES:
        c = make_case(rng, i)
        if safe(c["logits"], c["params"]):
            cases.append(c)
            i += 1
    return cases


def import_hf():
    import torch
    import transformers
    try:
        from transformers.generation.logits_process import (
            MinPLogitsWarper, RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper,
            TopKLogitsWarper, TopPLogitsWarper)
    except ImportError:
        from transformers import (MinPLogitsWarper, RepetitionPenaltyLogitsProcessor,
                                  TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper)
    return torch, transformers, dict(
        min_p=MinPLogitsWarper, rep=RepetitionPenaltyLogitsProcessor, temp=TemperatureLogitsWarper,
        top_k=TopKLogitsWarper, top_p=TopPLogitsWarper)


def hf_probs(torch, P, c):
    p = c["params"]
    v = len(c["logits"])
    scores = torch.tensor([c["logits"]], dtype=torch.float32)
    logprobs = torch.log_softmax(scores, dim=-1)[0]
    # Logit bias, then penalties: vLLM's order.
    for tid, b in p["logit_bias"].items():
        scores[0, int(tid)] += b
    history = p["prompt"] + p["output"]
    ids = torch.tensor([history if history else [0]], dtype=torch.long)
    if p["repetition_penalty"] != 1 and history:
        scores = P["rep"](penalty=p["repetition_penalty"])(ids, scores)
    if p["output"]:
        counts = torch.zeros(v, dtype=torch.float32)
        for t in p["output"]:
            counts[t] += 1
        scores = scores - p["frequency_penalty"] * counts[None, :]
        scores = scores - p["presence_penalty"] * (counts > 0).to(torch.float32)[None, :]
    probs = torch.zeros(v, dtype=torch.float64)
    if p["temperature"] < 1e-5:
        probs[int(torch.argmax(scores[0]))] = 1.0  # torch.argmax: first maximal index
        return probs, logprobs
    # generate()'s sampling order: temperature, top-k, top-p, min-p.
    scores = P["temp"](p["temperature"])(ids, scores)
    if 0 < p["top_k"]:
        scores = P["top_k"](top_k=p["top_k"])(ids, scores)
    if p["top_p"] < 1:
        scores = P["top_p"](top_p=p["top_p"])(ids, scores)
    if p["min_p"] > 0:
        scores = P["min_p"](min_p=p["min_p"])(ids, scores)
    probs = torch.softmax(scores[0], dim=-1).to(torch.float64)
    return probs, logprobs


def main(argv):
    dry = "--dry-run" in argv
    args = [a for a in argv[1:] if a != "--dry-run"]
    if len(args) != 1:
        print(__doc__)
        return 2
    out_dir = args[0]
    os.makedirs(out_dir, exist_ok=True)
    print("generating %d cases (seed %d)" % (N_CASES, SEED), flush=True)
    cases = gen_cases()
    meta = {"generator": "engine/sample/testdata/hf_reference.py", "seed": SEED}
    if dry:
        meta["dry_run"] = True
    else:
        torch, transformers, P = import_hf()
        meta["torch"] = torch.__version__
        meta["transformers"] = transformers.__version__
        print("torch %s, transformers %s" % (torch.__version__, transformers.__version__), flush=True)
        for c in cases:
            probs, logprobs = hf_probs(torch, P, c)
            c["probs"] = [float(x) for x in probs]
            c["logprobs"] = [float(x) for x in logprobs]
            kept = sum(1 for x in c["probs"] if x > 0)
            print("  %-12s vocab %3d kept %3d" % (c["name"], len(c["logits"]), kept), flush=True)
    path = os.path.join(out_dir, "hf_reference.json")

    def enc(x):  # JSON has no infinities: spell -Inf as a string
        if isinstance(x, float) and math.isinf(x):
            return "-Inf" if x < 0 else "+Inf"
        return x

    for c in cases:
        for key in ("logits", "logprobs"):
            if key in c:
                c[key] = [enc(x) for x in c[key]]
    with open(path, "w") as f:
        json.dump({"meta": meta, "cases": cases}, f, separators=(",", ":"))
        f.write("\n")
    print("wrote %s (%d bytes)" % (path, os.path.getsize(path)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
