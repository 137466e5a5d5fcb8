#!/usr/bin/env python3
"""Tiny random Qwen3-Next / Qwen3.5 / Qwen3.5-MoE checkpoints and float64 references.

Usage:  python3 tests/reference/make_hybrid_fixtures.py OUTDIR

Same layout and JSON format as make_fixtures.py (see README.md), for hybrid
models mixing gated-delta-net linear attention with gated full attention.
Each prompt additionally records `top_decode`: the top-10 log-probs of a
cached decode (prefill of the first half, then one token at a time), which
exercises transformers' own recurrent path. Checkpoints also carry one MTP
layer (`mtp.*` tensors, random, not used by the references).

Each architecture runs independently: a failure prints its traceback and the
others still run; the exit status is 1 if any failed or any check complained.
"""

from __future__ import annotations

import functools
import math
import os
import re
import sys
import traceback
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common as C  # noqa: E402  (sets the offline environment before transformers loads)
import torch  # noqa: E402

PROMPTS = (10, 150, 200)  # >= 150 so the chunked form spans several 64-token chunks
LAYER_TYPES = ["linear_attention", "linear_attention", "linear_attention", "full_attention"]
LINEAR = dict(linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
              linear_value_head_dim=16, linear_conv_kernel_dim=4)

CASES = [
    dict(name="qwen3next-tiny", arch="qwen3_next", dtype="bf16", vocab=431, hidden=64, heads=4, kv_heads=2,
         head_dim=32, intermediate=88, tied=False, rope_theta=10000.0, max_pos=256, experts=6, top_k=2,
         moe_intermediate=27, shared_intermediate=43, norm_topk_prob=True),
    dict(name="qwen35-tiny", arch="qwen3_5", dtype="bf16", vocab=457, hidden=64, heads=4, kv_heads=2,
         head_dim=32, intermediate=89, tied=True, rope_theta=1000000.0, max_pos=256, mrope_section=[2, 1, 1]),
    dict(name="qwen35moe-tiny", arch="qwen3_5_moe", dtype="bf16", vocab=389, hidden=64, heads=4, kv_heads=2,
         head_dim=32, tied=False, rope_theta=10000.0, max_pos=256, experts=6, top_k=2, moe_intermediate=27,
         shared_intermediate=43, mrope_section=[2, 1, 1]),
]

ARCHS = {
    "qwen3_next": ("qwen3_next", "Qwen3NextForCausalLM", "Qwen3NextConfig"),
    "qwen3_5": ("qwen3_5", "Qwen3_5ForCausalLM", "Qwen3_5TextConfig"),
    "qwen3_5_moe": ("qwen3_5_moe", "Qwen3_5MoeForCausalLM", "Qwen3_5MoeTextConfig"),
}

# Hub experts layout: Qwen3-Next repos store one 2-D tensor per expert,
# Qwen3.5-MoE repos store fused 3-D gate_up_proj / down_proj.
EXPERT_LAYOUT = {"qwen3_next": "per_expert", "qwen3_5_moe": "fused"}

COMMON_KEYS = [
    "attention_bias", "attention_dropout", "bos_token_id", "eos_token_id", "head_dim", "hidden_act",
    "hidden_size", "initializer_range", "layer_types", "linear_conv_kernel_dim", "linear_key_head_dim",
    "linear_num_key_heads", "linear_num_value_heads", "linear_value_head_dim", "max_position_embeddings",
    "num_attention_heads", "num_hidden_layers", "num_key_value_heads", "rms_norm_eps", "tie_word_embeddings",
    "use_cache", "vocab_size",
]
MOE_KEYS = ["moe_intermediate_size", "num_experts", "num_experts_per_tok", "output_router_logits",
            "router_aux_loss_coef", "shared_expert_intermediate_size"]
CONFIG_KEYS = {
    "qwen3_next": COMMON_KEYS + MOE_KEYS + ["decoder_sparse_step", "intermediate_size", "mlp_only_layers",
                                            "norm_topk_prob", "partial_rotary_factor"],
    "qwen3_5": COMMON_KEYS + ["intermediate_size"],
    "qwen3_5_moe": COMMON_KEYS + MOE_KEYS,
}
REQUIRED_KEYS = set(COMMON_KEYS) - {"attention_dropout", "bos_token_id", "initializer_range", "use_cache"} | {
    "intermediate_size", "moe_intermediate_size", "num_experts", "num_experts_per_tok",
    "shared_expert_intermediate_size", "decoder_sparse_step", "mlp_only_layers", "norm_topk_prob"}


# ------------------------------------------------------------------ configs


def make_config(case, config_cls):
    vocab = case["vocab"]
    rope = {"rope_type": "default", "rope_theta": case["rope_theta"], "partial_rotary_factor": 0.25}
    if "mrope_section" in case:  # Qwen3.5 text configs carry the (text-only: inert) M-RoPE split
        rope.update(mrope_section=list(case["mrope_section"]), mrope_interleaved=True)
    kwargs = dict(
        vocab_size=vocab, hidden_size=case["hidden"], num_hidden_layers=len(LAYER_TYPES),
        num_attention_heads=case["heads"], num_key_value_heads=case["kv_heads"], head_dim=case["head_dim"],
        hidden_act="silu", max_position_embeddings=case["max_pos"], rms_norm_eps=1e-6,
        tie_word_embeddings=case["tied"], rope_parameters=rope, attention_bias=False,
        layer_types=list(LAYER_TYPES), bos_token_id=vocab - 2, eos_token_id=vocab - 1,
        attn_implementation="eager", experts_implementation="eager", **LINEAR,
    )
    if "intermediate" in case:
        kwargs["intermediate_size"] = case["intermediate"]
    if "experts" in case:
        kwargs.update(num_experts=case["experts"], num_experts_per_tok=case["top_k"],
                      moe_intermediate_size=case["moe_intermediate"],
                      shared_expert_intermediate_size=case["shared_intermediate"])
    if case["arch"] == "qwen3_next":
        kwargs.update(norm_topk_prob=case["norm_topk_prob"], decoder_sparse_step=1, mlp_only_layers=[])
    return config_cls(**kwargs)


def write_configs(model, case, path):
    arch = case["arch"]
    extra = {"full_attention_interval": C.full_attention_interval(LAYER_TYPES),
             "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False}
    if arch == "qwen3_next":  # Hub Qwen3-Next: rope_theta / partial_rotary_factor / rope_scaling, torch_dtype
        style = "legacy"
    else:  # Hub Qwen3.5 text configs: rope_parameters (with the M-RoPE split) and dtype
        style = "v5"
        extra["attn_output_gate"] = True
    cfg = C.hub_config(model, CONFIG_KEYS[arch], style=style, dtype_key=case["dtype"],
                       required=REQUIRED_KEYS, extra=extra)
    C.write_json(os.path.join(path, "config.json"), cfg)
    vocab = case["vocab"]
    C.write_json(os.path.join(path, "generation_config.json"), C.generation_config(vocab - 2, vocab - 1, vocab - 2))


# ------------------------------------------------------ expected Hub layout


def attention_shapes(case, p):
    h, hd, nh, nkv = case["hidden"], case["head_dim"], case["heads"], case["kv_heads"]
    return {
        p + "self_attn.q_proj.weight": [nh * hd * 2, h],  # query and output gate, per head
        p + "self_attn.k_proj.weight": [nkv * hd, h], p + "self_attn.v_proj.weight": [nkv * hd, h],
        p + "self_attn.o_proj.weight": [h, nh * hd],
        p + "self_attn.q_norm.weight": [hd], p + "self_attn.k_norm.weight": [hd],
    }


def linear_attention_shapes(case, p):
    h = case["hidden"]
    kd = LINEAR["linear_num_key_heads"] * LINEAR["linear_key_head_dim"]
    nv = LINEAR["linear_num_value_heads"]
    vd = nv * LINEAR["linear_value_head_dim"]
    q = p + "linear_attn."
    shapes = {
        q + "conv1d.weight": [2 * kd + vd, 1, LINEAR["linear_conv_kernel_dim"]],
        q + "A_log": [nv], q + "dt_bias": [nv], q + "norm.weight": [LINEAR["linear_value_head_dim"]],
        q + "out_proj.weight": [h, vd],
    }
    if case["arch"] == "qwen3_next":
        shapes.update({q + "in_proj_qkvz.weight": [2 * kd + 2 * vd, h], q + "in_proj_ba.weight": [2 * nv, h]})
    else:
        shapes.update({q + "in_proj_qkv.weight": [2 * kd + vd, h], q + "in_proj_z.weight": [vd, h],
                       q + "in_proj_b.weight": [nv, h], q + "in_proj_a.weight": [nv, h]})
    return shapes


def mlp_shapes(case, p):
    h = case["hidden"]
    if "experts" not in case:
        i = case["intermediate"]
        return {p + "mlp.gate_proj.weight": [i, h], p + "mlp.up_proj.weight": [i, h],
                p + "mlp.down_proj.weight": [h, i]}
    e, i, s = case["experts"], case["moe_intermediate"], case["shared_intermediate"]
    shapes = {
        p + "mlp.gate.weight": [e, h], p + "mlp.shared_expert_gate.weight": [1, h],
        p + "mlp.shared_expert.gate_proj.weight": [s, h], p + "mlp.shared_expert.up_proj.weight": [s, h],
        p + "mlp.shared_expert.down_proj.weight": [h, s],
    }
    if EXPERT_LAYOUT[case["arch"]] == "fused":
        shapes.update({p + "mlp.experts.gate_up_proj": [e, 2 * i, h], p + "mlp.experts.down_proj": [e, h, i]})
    else:
        for x in range(e):
            q = f"{p}mlp.experts.{x}."
            shapes.update({q + "gate_proj.weight": [i, h], q + "up_proj.weight": [i, h],
                           q + "down_proj.weight": [h, i]})
    return shapes


def layer_shapes(case, p, layer_type):
    h = case["hidden"]
    shapes = {p + "input_layernorm.weight": [h], p + "post_attention_layernorm.weight": [h]}
    if layer_type == "linear_attention":
        shapes.update(linear_attention_shapes(case, p))
    else:
        shapes.update(attention_shapes(case, p))
    shapes.update(mlp_shapes(case, p))
    return shapes


def expected_shapes(case, with_mtp):
    h, v = case["hidden"], case["vocab"]
    shapes = {"model.embed_tokens.weight": [v, h], "model.norm.weight": [h]}
    if not case["tied"]:
        shapes["lm_head.weight"] = [v, h]
    for i, lt in enumerate(LAYER_TYPES):
        shapes.update(layer_shapes(case, f"model.layers.{i}.", lt))
    if with_mtp:
        shapes.update(mtp_shapes(case))
    return shapes


def mtp_shapes(case):
    h = case["hidden"]
    shapes = {"mtp.fc.weight": [h, 2 * h], "mtp.pre_fc_norm_embedding.weight": [h],
              "mtp.pre_fc_norm_hidden.weight": [h], "mtp.norm.weight": [h]}
    shapes.update(layer_shapes(case, "mtp.layers.0.", "full_attention"))
    return shapes


def mtp_tensors(case, zero_centred_norms, dtype):
    """Random MTP weights in the Hub layout (transformers ignores `mtp.*` on load)."""
    out = {}
    for name, shape in sorted(mtp_shapes(case).items()):
        if name.endswith(("norm.weight", "norm_embedding.weight", "norm_hidden.weight")):
            value = C.NORM_STD * C.randn(shape, case["name"], "mtp", name)
            if not zero_centred_norms:
                value = value + 1.0
        else:
            kind = C.param_kind(name, torch.empty(shape), object())
            value = C.new_value(kind, name, shape, torch.zeros(shape), f"{case['name']}/mtp", 1.0,
                                1.0 / math.sqrt(case["hidden"]))
        out[name] = value.to(dtype).contiguous()
    return out


# ------------------------------------------------------- linear-attention path


LINEAR_FUNCS = ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule", "chunk_gated_delta_rule",
                "fused_recurrent_gated_delta_rule", "causal_conv1d_fn", "causal_conv1d_update",
                "torch_causal_conv1d_update")
INSTANCE_ATTRS = ("chunk_gated_delta_rule", "recurrent_gated_delta_rule", "causal_conv1d_fn",
                  "causal_conv1d_update")


def describe_fn(fn):
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"


def report_fast_path_availability():
    from transformers.utils import import_utils

    fla = getattr(import_utils, "is_flash_linear_attention_available", lambda: "n/a")()
    conv = getattr(import_utils, "is_causal_conv1d_available", lambda: "n/a")()
    C.log(f"flash-linear-attention available: {fla}; causal-conv1d available: {conv} "
          "(both absent => transformers' torch reference implementation)")


def force_torch_linear_attention(model, modeling):
    """Points Qwen3-Next's per-module kernel attributes at the torch reference functions."""
    swaps = Counter()
    torch_impl = {
        "chunk_gated_delta_rule": getattr(modeling, "torch_chunk_gated_delta_rule", None),
        "recurrent_gated_delta_rule": getattr(modeling, "torch_recurrent_gated_delta_rule", None),
        "causal_conv1d_update": getattr(modeling, "torch_causal_conv1d_update", None),
    }
    for _, mod in model.named_modules():
        attrs = vars(mod)
        for attr, fn in torch_impl.items():
            if fn is not None and attr in attrs and attrs[attr] is not fn:
                swaps[f"{attr}: {describe_fn(attrs[attr])} -> {describe_fn(fn)}"] += 1
                setattr(mod, attr, fn)
        if attrs.get("causal_conv1d_fn") is not None and "causal_conv1d_fn" in attrs:
            swaps[f"causal_conv1d_fn: {describe_fn(attrs['causal_conv1d_fn'])} -> None"] += 1
            mod.causal_conv1d_fn = None
    for line, n in swaps.items():
        C.log(f"  forced torch path ({n} modules): {line}")


class PathCounter:
    """Counts calls of the gated-delta / conv functions to show which path ran."""

    def __init__(self, model, modeling):
        self.counts = Counter()
        self.restore = []
        for fname in LINEAR_FUNCS:
            fn = getattr(modeling, fname, None)
            if callable(fn):
                self._patch(modeling, fname, fn, f"{fname} ({describe_fn(fn)})")
        for _, mod in model.named_modules():
            if "A_log" not in dict(mod.named_parameters(recurse=False)):
                continue  # only the gated-delta-net modules
            for attr in sorted(set(INSTANCE_ATTRS + LINEAR_FUNCS)):
                fn = getattr(mod, attr, None)  # instance attribute, or a function bound on the class
                if callable(fn):
                    self._patch(mod, attr, fn, f"self.{attr} ({describe_fn(fn)})")

    def _patch(self, owner, attr, fn, label):
        if isinstance(fn, torch.nn.Module):
            return  # a kernel layer, not a function: leave it alone
        counts = self.counts

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            counts[label] += 1
            return fn(*args, **kwargs)

        had_own = isinstance(owner, torch.nn.Module) and attr in vars(owner)
        try:
            setattr(owner, attr, wrapper)
        except (TypeError, AttributeError) as err:  # instrumentation must never break the run
            C.log(f"  (could not instrument {label}: {err})")
            return
        self.restore.append((owner, attr, fn, had_own))

    def close(self):
        for owner, attr, fn, had_own in reversed(self.restore):
            if isinstance(owner, torch.nn.Module) and not had_own:
                delattr(owner, attr)  # falls back to the class attribute again
            else:
                setattr(owner, attr, fn)
        self.restore = []

    def summary(self):
        called = {k: v for k, v in self.counts.items() if v}
        uses_fla = any(re.search(r"\bfla\b", k.split("(", 1)[-1]) for k in called)
        path = "flash-linear-attention kernels" if uses_fla else "torch reference" if called else "unknown"
        return path, called


# ------------------------------------------------------------ cached decode


@torch.no_grad()
def decode_logprobs(model, ids, start):
    """Prefill ids[:start] with the cache, then feed one token at a time.

    Returns float64 log-probs for positions start..len(ids)-1. Positions are
    passed explicitly so they do not depend on how the hybrid cache counts.
    """
    with_cache_position = C.forward_accepts(model, "cache_position")
    prefill = dict(input_ids=torch.tensor([ids[:start]]), use_cache=True)
    if with_cache_position:
        prefill["cache_position"] = torch.arange(start)
    out = model(**prefill)
    cache = out.past_key_values
    rows = []
    for t in range(start, len(ids)):
        step = dict(input_ids=torch.tensor([[ids[t]]]), past_key_values=cache, use_cache=True,
                    position_ids=torch.tensor([[t]]))
        if with_cache_position:
            step["cache_position"] = torch.tensor([t])
        out = model(**step)
        if out.past_key_values is not None:
            cache = out.past_key_values
        rows.append(torch.log_softmax(out.logits[0, -1].to(torch.float64), dim=-1))
    return torch.stack(rows)


def reference(model, model32, case, probe, problems):
    name, vocab = case["name"], case["vocab"]
    entries = []
    for n in PROMPTS:
        ids = C.random_tokens(n, vocab, name, "prompt", n)
        if probe:
            probe.reset()
        lp = C.logprobs(model, ids)
        entry = {"tokens": ids, "top": [C.top_pairs(lp[i]) for i in range(n)],
                 "next_logprob": C.next_logprobs(lp, ids)}
        if probe:
            entry["min_router_gap"] = C.rnd(probe.min_gap)
        steps = max(0, min(C.GREEDY_STEPS, case["max_pos"] - n))
        entry["greedy"], entry["greedy_margin"] = C.greedy(model, ids, steps)
        start = n // 2
        dec = decode_logprobs(model, ids, start)
        entry["decode_start"] = start
        entry["top_decode"] = [C.top_pairs(dec[i]) for i in range(dec.shape[0])]
        entry["decode_max_abs_diff"] = C.rnd(C.max_top_diff(lp[start:], dec))
        if entry["decode_max_abs_diff"] > 1e-3:
            problems.add(name, f"prompt {n}: cached decode differs from the full forward by "
                               f"{entry['decode_max_abs_diff']:.2e}")
        entry["f32_max_abs_diff"] = C.rnd(C.max_top_diff(lp, C.logprobs(model32, ids)))
        entries.append((entry, lp))
    return entries


# --------------------------------------------------------------------- case


def run_case(case, outdir, problems):
    timer = C.Timer()
    name, arch = case["name"], case["arch"]
    C.log(f"\n=== {name} ({arch}, {case['dtype']})")
    module, model_name, config_name = ARCHS[arch]
    modeling, model_cls, config_cls = C.import_arch(module, model_name, config_name)

    model = C.build_model(model_cls, make_config(case, config_cls))
    force_torch_linear_attention(model, modeling)
    la = model.model.layers[0].linear_attn
    C.log(f"  built {model_name}: attn={model.config._attn_implementation} "
          f"experts={getattr(model.config, '_experts_implementation', None)} "
          f"layer_types={list(model.config.layer_types)} linear_attn={type(la).__name__} "
          f"norm={type(la.norm).__name__}")
    C.log(f"  rope_parameters={getattr(model.config, 'rope_parameters', None)}")
    report, norms = C.perturb_model(model, name, case["hidden"], case["tied"])
    C.check_tied(model, case["tied"])
    C.log(f"  perturbed parameters: {dict(sorted(report.items()))}; norm conventions {norms}")
    if report.get("other") or report.get("norm_unknown"):
        problems.add(name, f"unclassified parameters: {dict(report)}")
    decay = (-la.A_log.detach().exp()).tolist()
    C.log(f"  layer 0 per-head log-decay scale -exp(A_log) = {[round(d, 4) for d in decay]}")
    history = C.calibrate_output_scale(model, C.random_tokens(24, case["vocab"], name, "calibration"),
                                       case["vocab"])
    C.log(f"  output-scale calibration, mean entropy per step: {[round(h, 3) for h in history]}"
          f" (log V = {math.log(case['vocab']):.3f})")
    for line in C.describe_rotary(model):
        C.log("  rotary " + line)

    path = os.path.join(outdir, "models", name)
    dtype = C.DTYPES[case["dtype"]]
    C.cast_parameters(model, dtype)
    C.save_pretrained(model, path)
    C.cast_parameters(model, torch.float64)  # now holds exactly the stored values

    want = EXPERT_LAYOUT.get(arch, "none")
    layout = C.expert_layout(C.checkpoint_tensors(path))
    if want != "none" and layout != want:
        C.log(f"  save_pretrained wrote experts as '{layout}'; rewriting to the Hub '{want}' layout")
        C.rewrite_checkpoint(path, C.experts_to_per_expert if want == "per_expert" else C.experts_to_fused)
    mtp = mtp_tensors(case, report.get("norm_zero", 0) > 0, dtype)
    C.rewrite_checkpoint(path, lambda sd: {**sd, **mtp})
    C.log(f"  added {len(mtp)} MTP tensors (mtp.*)")
    write_configs(model, case, path)
    C.check_config_file(os.path.join(path, "config.json"), problems, name)

    tensors = C.checkpoint_tensors(path)
    C.verify_names(tensors, expected_shapes(case, with_mtp=True), case["dtype"], problems, name)
    C.log(f"  tensors of {name}:")
    C.print_tensor_table({k: v for k, v in tensors.items() if not k.startswith("mtp.")}, limit=60)

    loaded, info = C.load_pretrained(model_cls, path, torch.float64)
    issues = C.loading_problems(info, ignore_prefixes=("mtp.",), tied=case["tied"])
    if issues and want != "none" and layout != want:
        # transformers cannot read the Hub experts layout we wrote: keep what it saved, and say so.
        problems.add(name, f"transformers did not load the '{want}' experts layout ({issues}); "
                           f"falling back to the '{layout}' layout save_pretrained wrote")
        C.rewrite_checkpoint(path, C.experts_to_per_expert if layout == "per_expert" else C.experts_to_fused)
        tensors = C.checkpoint_tensors(path)
        loaded, info = C.load_pretrained(model_cls, path, torch.float64)
        issues = C.loading_problems(info, ignore_prefixes=("mtp.",), tied=case["tied"])
    if issues:
        raise RuntimeError(f"reload reported {issues}")
    C.check_tied(loaded, case["tied"])
    force_torch_linear_attention(loaded, modeling)
    diff, rope_ok = C.compare_models(model, loaded, C.random_tokens(PROMPTS[1], case["vocab"], name, "reload"))
    C.log(f"  reload from disk: max |logit diff| vs in-memory = {diff:.3g}, rotary identical = {rope_ok}")
    if diff > 1e-9 or not rope_ok:
        raise RuntimeError(f"reloaded model differs (logit diff {diff}, rotary identical {rope_ok})")
    del model

    model32, _ = C.load_pretrained(model_cls, path, torch.float32)
    force_torch_linear_attention(model32, modeling)
    probe = C.RouterGapProbe(loaded, case["top_k"]) if "experts" in case else None
    counter = PathCounter(loaded, modeling)
    try:
        entries = reference(loaded, model32, case, probe, problems)
    finally:
        counter.close()
        if probe:
            probe.close()
    path_name, called = counter.summary()
    C.log(f"  linear-attention path: {path_name}; calls: {called}")
    if path_name == "flash-linear-attention kernels":
        problems.add(name, "linear attention ran flash-linear-attention kernels, not the torch reference")
    elif path_name != "torch reference":  # a CPU float64 run cannot have used the Triton kernels
        C.log("  WARNING: no instrumented gated-delta function was called; path not confirmed")

    ref = {"model": name, "arch": model_name, "weights_dtype": case["dtype"], **C.versions(),
           "prompts": [e for e, _ in entries]}
    os.makedirs(os.path.join(outdir, "reference"), exist_ok=True)
    ref_path = os.path.join(outdir, "reference", f"{name}.json")
    C.write_json(ref_path, ref, compact=True)

    row = C.summary_row(case, entries, tensors, path)
    if not 0.15 <= row["h_all_frac"] <= 0.85:
        problems.add(name, f"mean next-token entropy is {row['h_all_frac']:.2f} x log(V)")
    C.log(f"  wrote {name}: {len(tensors)} tensors, {row['kb']:.0f} KiB, reference "
          f"{os.path.getsize(ref_path) / 1024:.0f} KiB, {timer}")
    return row


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    outdir = os.path.abspath(argv[1])
    os.makedirs(outdir, exist_ok=True)
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    torch.manual_seed(0)
    C.quiet_transformers()
    C.log(f"make_hybrid_fixtures: {C.versions()} -> {outdir}")
    report_fast_path_availability()
    problems, rows, failed = C.Problems(), [], []
    for case in CASES:
        try:
            rows.append(run_case(case, outdir, problems))
        except Exception:  # one failing architecture must not stop the others
            traceback.print_exc()
            sys.stdout.flush()
            failed.append(case["name"])
    v = C.versions()
    C.update_source_md(outdir, "make_hybrid_fixtures", f"""
## Qwen3-Next / Qwen3.5 / Qwen3.5-MoE fixtures (tests/reference/make_hybrid_fixtures.py)

Tiny random-weight hybrid models (3 gated-delta-net layers + 1 gated full-attention layer) built with
transformers {v['transformers']} (torch {v['torch']}) classes, every parameter overwritten from fixed seeds,
saved in the Hub layout with one random MTP layer; `reference/<name>.json` holds float64 CPU log-probs from
the reloaded checkpoints, including a cached token-by-token decode (`top_decode`). Generated data, no
third-party content. Regenerate: `python3 tests/reference/make_hybrid_fixtures.py OUTDIR`.
Cases: {", ".join(r["name"] for r in rows)}.
""")
    C.print_summary(rows, failed, outdir, problems)
    return 1 if failed or problems.items else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
