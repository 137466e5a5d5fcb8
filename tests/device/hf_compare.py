#!/usr/bin/env python3
"""Random-weight Qwen3 checkpoints of real shapes and transformers references.

Usage:  python3 tests/device/hf_compare.py OUTDIR [case ...]

Cases: qwen3-1.7b (the Qwen3-1.7B shapes, all 28 layers) and qwen3-30b-a3b-4l
(the Qwen3-30B-A3B shapes cut to 4 layers). For each, writes OUTDIR/<case>/
(config.json, model.safetensors in bf16 with Hub tensor names) and
OUTDIR/<case>/reference.json: for two prompts, the top-10 log-probs at every
position and a 16-step greedy continuation with the margin between the two
best tokens at each step, from transformers running the same bf16 weights
upcast to float32 on the GPU. The Go test TestHFReference
(INFERNIX_HF_DIR=OUTDIR) compares the CUDA backend with these.
Exit status 0 when every requested case was written.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))

import common as C  # noqa: E402  (offline environment before transformers loads)
import torch  # noqa: E402

CASES = {
    "qwen3-1.7b": dict(arch="qwen3", vocab=151936, hidden=2048, inter=6144, layers=28, heads=16, kv=8, hd=128,
                       tied=True, theta=1000000.0, max_pos=40960),
    "qwen3-30b-a3b-4l": dict(arch="qwen3_moe", vocab=151936, hidden=2048, inter=6144, layers=4, heads=32, kv=4,
                             hd=128, tied=False, theta=1000000.0, max_pos=40960, experts=128, top_k=8,
                             moe_inter=768),
}
PROMPT_LENS = (24, 100)
GREEDY = 16
TOP = 10


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def make(case):
    from transformers import Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

    kw = dict(vocab_size=case["vocab"], hidden_size=case["hidden"], intermediate_size=case["inter"],
              num_hidden_layers=case["layers"], num_attention_heads=case["heads"], num_key_value_heads=case["kv"],
              head_dim=case["hd"], hidden_act="silu", max_position_embeddings=case["max_pos"], rms_norm_eps=1e-6,
              tie_word_embeddings=case["tied"], rope_parameters={"rope_type": "default", "rope_theta": case["theta"]},
              attention_bias=False, use_sliding_window=False, bos_token_id=151643, eos_token_id=151645)
    if case["arch"] == "qwen3_moe":
        kw.update(num_experts=case["experts"], num_experts_per_tok=case["top_k"], moe_intermediate_size=case["moe_inter"],
                  norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[])
        cfg, cls, arch = Qwen3MoeConfig(**kw), Qwen3MoeForCausalLM, "Qwen3MoeForCausalLM"
    else:
        cfg, cls, arch = Qwen3Config(**kw), Qwen3ForCausalLM, "Qwen3ForCausalLM"
    cfg.architectures = [arch]
    with torch.device("cuda"):
        model = cls(cfg)
    model.eval()
    C.force_eager(model)
    # Peaked but sane distributions: embeddings (tied to the output) std 0.05,
    # routers std 0.2 (clear expert choices), norms 1 ± 0.1.
    g = torch.Generator(device="cuda").manual_seed(1234)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g, device="cuda"))
            elif "embed_tokens" in name or name == "lm_head.weight":
                p.copy_(0.05 * torch.randn(p.shape, generator=g, device="cuda"))
            elif name.endswith("mlp.gate.weight"):
                p.copy_(0.2 * torch.randn(p.shape, generator=g, device="cuda"))
            else:
                p.copy_(0.02 * torch.randn(p.shape, generator=g, device="cuda"))
    C.cast_parameters(model, torch.bfloat16)
    return model, cfg, arch


def save(model, cfg, arch, path, case):
    from safetensors.torch import save_file

    os.makedirs(path, exist_ok=True)
    sd = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
    if cfg.tie_word_embeddings:
        sd.pop("lm_head.weight", None)
    if any(k.endswith("experts.gate_up_proj") or k.endswith("experts.down_proj") for k in sd):
        sd = C.experts_to_per_expert(sd)
    for k, v in sd.items():
        if v.dtype != torch.bfloat16:
            raise RuntimeError(f"{k} is {v.dtype}, expected bfloat16")
    save_file(sd, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    d = cfg.to_dict()
    d["architectures"] = [arch]
    d["torch_dtype"] = "bfloat16"
    d["rope_theta"] = case["theta"]
    # The keys the Go loader reads, written explicitly whatever names this
    # transformers version uses internally.
    d.update(vocab_size=case["vocab"], hidden_size=case["hidden"], intermediate_size=case["inter"],
             num_hidden_layers=case["layers"], num_attention_heads=case["heads"], num_key_value_heads=case["kv"],
             head_dim=case["hd"], tie_word_embeddings=case["tied"], max_position_embeddings=case["max_pos"],
             rms_norm_eps=1e-6, hidden_act="silu")
    if case["arch"] == "qwen3_moe":
        d.update(num_experts=case["experts"], num_experts_per_tok=case["top_k"], moe_intermediate_size=case["moe_inter"],
                 norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[])
    log("  config keys: " + ", ".join(sorted(k for k in d if "expert" in k or "moe" in k)))
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(d, f, indent=1, default=str)
    log(f"  wrote {len(sd)} tensors, {sum(v.numel() * 2 for v in sd.values()) / 1e9:.2f} GB")


@torch.no_grad()
def logprobs(model, ids):
    out = model(input_ids=torch.tensor([ids], device="cuda"), use_cache=False)
    return torch.log_softmax(out.logits[0].to(torch.float64), dim=-1)


def reference(model, vocab, name):
    model.float()  # bf16 weights upcast exactly; arithmetic in float32
    gen = torch.Generator().manual_seed(99)
    prompts = []
    for n in PROMPT_LENS:
        ids = torch.randint(0, vocab - 300, (n,), generator=gen).tolist()
        lp = logprobs(model, ids)
        top = []
        for row in lp:
            v, i = torch.topk(row, TOP)
            top.append([[int(a), round(float(b), 9)] for a, b in zip(i.tolist(), v.tolist())])
        seq, greedy, margins = list(ids), [], []
        last = lp[-1]
        for _ in range(GREEDY):
            v, i = torch.topk(last, 2)
            greedy.append(int(i[0]))
            margins.append(float(v[0] - v[1]))
            seq.append(int(i[0]))
            last = logprobs(model, seq)[-1]
        prompts.append({"tokens": ids, "top": top, "greedy": greedy, "greedy_margin": margins})
        ent = float(-(lp.exp() * lp).sum(-1).mean())
        log(f"  prompt of {n}: mean entropy {ent:.2f} nats, greedy {greedy[:6]}…, min margin {min(margins):.3g}")
    return {"model": name, "prompts": prompts}


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    out = sys.argv[1]
    names = sys.argv[2:] or list(CASES)
    if not torch.cuda.is_available():
        log("no CUDA device for the reference")
        return 1
    C.quiet_transformers()
    status = 0
    for name in names:
        try:
            t0 = time.time()
            log(f"== {name}")
            model, cfg, arch = make(CASES[name])
            path = os.path.join(out, name)
            save(model, cfg, arch, path, CASES[name])
            ref = reference(model, CASES[name]["vocab"], name)
            ref["arch"] = arch
            with open(os.path.join(path, "reference.json"), "w") as f:
                json.dump(ref, f)
            log(f"  done in {time.time() - t0:.1f}s")
            del model
            torch.cuda.empty_cache()
        except Exception:
            traceback.print_exc()
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
