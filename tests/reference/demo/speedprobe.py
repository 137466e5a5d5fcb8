#!/usr/bin/env python3
"""Training throughput of the demo architecture under each --compile mode of train.py.

  python3 speedprobe.py [--modes none,layers,model] [--steps 24]

Random token batches in three padded shapes like train.py's (rows x width under a 64K-token budget,
rotated so that dynamic shapes are exercised), AdamW and clipping as in training; prints per mode the
time of the first step of each shape (compilation) and the steady tokens per second. Decides which
mode the recipe uses (DEMO_COMPILE) without spending a training run on it.
"""

import argparse
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train  # noqa: E402

SHAPES = [(222, 296), (128, 512), (409, 160)]


def probe(mode, steps, vocab=4096):
    torch.manual_seed(0)
    from transformers import Qwen3ForCausalLM
    cfg = train.build_config(vocab, vocab - 1, vocab - 2)
    cfg._attn_implementation = "sdpa"
    model = Qwen3ForCausalLM(cfg).cuda()
    fwd = train.compile_for_training(model, mode, lambda *a: print(" ", *a, flush=True))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    batches = [(torch.randint(0, vocab - 2, s, device="cuda"),) for s in SHAPES]
    first, t_steady, tok_steady = [], 0.0, 0
    for i in range(len(SHAPES) + steps):
        (x,) = batches[i % len(SHAPES)]
        torch.cuda.synchronize()
        t0 = time.time()
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = fwd(input_ids=x, labels=x, use_cache=False).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        dt = time.time() - t0
        if i < len(SHAPES):
            first.append(dt)
        else:
            t_steady += dt
            tok_steady += x.numel()
    rate = tok_steady / t_steady
    print(f"PROBE mode={mode} first steps {', '.join(f'{t:.1f}s' for t in first)}; steady {rate / 1e3:.0f}k tok/s "
          f"({1000 * t_steady / steps:.1f} ms/step); loss {loss.item():.3f}", flush=True)
    return rate


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modes", default="none,layers,model")
    ap.add_argument("--steps", type=int, default=24)
    a = ap.parse_args()
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = True
    rates = {}
    for mode in a.modes.split(","):
        try:
            rates[mode] = probe(mode, a.steps)
        except Exception as e:  # report and go on with the next mode
            print(f"PROBE mode={mode} failed: {type(e).__name__}: {str(e)[:500]}", flush=True)
    if "none" in rates:
        print("PROBE speedup vs eager: " + ", ".join(f"{m} {r / rates['none']:.2f}x" for m, r in rates.items()))


if __name__ == "__main__":
    main()
