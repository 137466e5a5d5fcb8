#!/usr/bin/env python3
"""Tiny random Qwen3 / Qwen3-MoE checkpoints and float64 reference log-probs.

Usage:  python3 tests/reference/make_fixtures.py OUTDIR

Writes OUTDIR/models/<name>/ (config.json, generation_config.json,
*.safetensors[, model.safetensors.index.json]) and OUTDIR/reference/<name>.json
for six cases, plus OUTDIR/SOURCE.md. See README.md beside this script for the
JSON format. Runs on CPU in float64 with transformers' own model classes;
needs torch, transformers (5.x) and safetensors, and no network.

Exit status: 0 when every case was written and passed every check, 1 otherwise
(the remaining cases still run after a failure).
"""

from __future__ import annotations

import math
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common as C  # noqa: E402  (sets the offline environment before transformers loads)
import torch  # noqa: E402

DEFAULT_PROMPTS = (7, 33, 80)

CASES = [
    dict(name="qwen3-tied-f32", arch="qwen3", dtype="f32", vocab=499, hidden=64, layers=2, heads=4,
         kv_heads=2, head_dim=64, intermediate=136, tied=True, rope_theta=10000.0, max_pos=256,
         gen_eos="list"),
    dict(name="qwen3-untied-bf16", arch="qwen3", dtype="bf16", vocab=1000, hidden=96, layers=3, heads=3,
         kv_heads=1, head_dim=128, intermediate=200, tied=False, rope_theta=1000000.0, max_pos=256),
    dict(name="qwen3-yarn-f16", arch="qwen3", dtype="f16", vocab=300, hidden=64, layers=2, heads=4,
         kv_heads=2, head_dim=32, intermediate=111, tied=False, rope_theta=10000.0, max_pos=128,
         yarn=dict(factor=4.0, original_max_position_embeddings=32), prompts=(20, 70, 120)),
    dict(name="qwen3-sharded", arch="qwen3", dtype="f32", vocab=499, hidden=64, layers=2, heads=4,
         kv_heads=2, head_dim=64, intermediate=136, tied=False, rope_theta=10000.0, max_pos=256, shards=2),
    dict(name="qwen3moe-bf16", arch="qwen3_moe", dtype="bf16", vocab=512, hidden=64, layers=2, heads=4,
         kv_heads=2, head_dim=32, intermediate=96, tied=False, rope_theta=1000000.0, max_pos=256,
         experts=8, top_k=2, moe_intermediate=48, norm_topk_prob=True, sparse_step=1, mlp_only=[],
         print_tensors=True),
    dict(name="qwen3moe-mixed-f32", arch="qwen3_moe", dtype="f32", vocab=311, hidden=48, layers=3, heads=4,
         kv_heads=1, head_dim=40, intermediate=80, tied=True, rope_theta=10000.0, max_pos=256, eps=1e-5,
         experts=6, top_k=3, moe_intermediate=37, norm_topk_prob=False, sparse_step=1, mlp_only=[0]),
]

ARCHS = {
    "qwen3": ("qwen3", "Qwen3ForCausalLM", "Qwen3Config"),
    "qwen3_moe": ("qwen3_moe", "Qwen3MoeForCausalLM", "Qwen3MoeConfig"),
}

# config.json keys of the Hub Qwen3 / Qwen3-MoE repos (written explicitly).
QWEN3_KEYS = [
    "attention_bias", "attention_dropout", "bos_token_id", "eos_token_id", "head_dim", "hidden_act",
    "hidden_size", "initializer_range", "intermediate_size", "max_position_embeddings", "max_window_layers",
    "num_attention_heads", "num_hidden_layers", "num_key_value_heads", "rms_norm_eps", "sliding_window",
    "tie_word_embeddings", "use_cache", "use_sliding_window", "vocab_size",
]
QWEN3_MOE_KEYS = QWEN3_KEYS + [
    "decoder_sparse_step", "mlp_only_layers", "moe_intermediate_size", "norm_topk_prob", "num_experts",
    "num_experts_per_tok", "output_router_logits", "router_aux_loss_coef",
]
REQUIRED_KEYS = {
    "head_dim", "hidden_size", "intermediate_size", "max_position_embeddings", "num_attention_heads",
    "num_hidden_layers", "num_key_value_heads", "rms_norm_eps", "tie_word_embeddings", "vocab_size",
    "decoder_sparse_step", "mlp_only_layers", "moe_intermediate_size", "norm_topk_prob", "num_experts",
    "num_experts_per_tok",
}


# ------------------------------------------------------------------ configs


def rope_parameters(case):
    rope = {"rope_type": "default", "rope_theta": case["rope_theta"]}
    if "yarn" in case:
        rope = {"rope_type": "yarn", "rope_theta": case["rope_theta"], **case["yarn"]}
    return rope


def make_config(case, config_cls):
    vocab = case["vocab"]
    kwargs = dict(
        vocab_size=vocab, hidden_size=case["hidden"], intermediate_size=case["intermediate"],
        num_hidden_layers=case["layers"], num_attention_heads=case["heads"],
        num_key_value_heads=case["kv_heads"], head_dim=case["head_dim"], hidden_act="silu",
        max_position_embeddings=case["max_pos"], rms_norm_eps=case.get("eps", 1e-6),
        tie_word_embeddings=case["tied"], rope_parameters=rope_parameters(case), attention_bias=False,
        use_sliding_window=False, bos_token_id=vocab - 2, eos_token_id=vocab - 1,
        attn_implementation="eager", experts_implementation="eager",
    )
    if case["arch"] == "qwen3_moe":
        kwargs.update(
            num_experts=case["experts"], num_experts_per_tok=case["top_k"],
            moe_intermediate_size=case["moe_intermediate"], norm_topk_prob=case["norm_topk_prob"],
            decoder_sparse_step=case["sparse_step"], mlp_only_layers=list(case["mlp_only"]),
        )
    return config_cls(**kwargs)


def is_moe_layer(case, i):
    return (case["arch"] == "qwen3_moe" and i not in case["mlp_only"] and case["experts"] > 0
            and (i + 1) % case["sparse_step"] == 0)


def expected_shapes(case):
    """Hub tensor names and shapes for the case, from first principles."""
    h, v, hd = case["hidden"], case["vocab"], case["head_dim"]
    nh, nkv = case["heads"], case["kv_heads"]
    shapes = {"model.embed_tokens.weight": [v, h], "model.norm.weight": [h]}
    if not case["tied"]:
        shapes["lm_head.weight"] = [v, h]
    for i in range(case["layers"]):
        p = f"model.layers.{i}."
        shapes.update({
            p + "input_layernorm.weight": [h], p + "post_attention_layernorm.weight": [h],
            p + "self_attn.q_proj.weight": [nh * hd, h], p + "self_attn.k_proj.weight": [nkv * hd, h],
            p + "self_attn.v_proj.weight": [nkv * hd, h], p + "self_attn.o_proj.weight": [h, nh * hd],
            p + "self_attn.q_norm.weight": [hd], p + "self_attn.k_norm.weight": [hd],
        })
        if is_moe_layer(case, i):
            inter = case["moe_intermediate"]
            shapes[p + "mlp.gate.weight"] = [case["experts"], h]
            for e in range(case["experts"]):
                q = f"{p}mlp.experts.{e}."
                shapes.update({q + "gate_proj.weight": [inter, h], q + "up_proj.weight": [inter, h],
                               q + "down_proj.weight": [h, inter]})
        else:
            inter = case["intermediate"]
            shapes.update({p + "mlp.gate_proj.weight": [inter, h], p + "mlp.up_proj.weight": [inter, h],
                           p + "mlp.down_proj.weight": [h, inter]})
    return shapes


# -------------------------------------------------------------------- YaRN


def yarn_expected(head_dim, base, factor, original, beta_fast=32.0, beta_slow=1.0):
    """YaRN inverse frequencies and attention factor (the paper's formulas, truncated range)."""
    dim = head_dim

    def correction_dim(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    inv = []
    for i in range(dim // 2):
        pos_freq = base ** (2 * i / dim)
        extrapolation = 1.0 - min(max((i - low) / (high - low), 0.0), 1.0)
        inv.append((1 / (factor * pos_freq)) * (1 - extrapolation) + (1 / pos_freq) * extrapolation)
    return inv, 0.1 * math.log(factor) + 1.0


def check_yarn(model, case, problems):
    """Proves YaRN is applied: prints inv_freq / attention scaling and compares to the formulas."""
    rot = C.rotary_modules(model)
    for line in C.describe_rotary(model):
        C.log("  rotary " + line)
    if not rot:
        raise RuntimeError("no rotary embedding module found")
    expected, scale = yarn_expected(case["head_dim"], case["rope_theta"], case["yarn"]["factor"],
                                    case["yarn"]["original_max_position_embeddings"])
    default = [1 / case["rope_theta"] ** (2 * i / case["head_dim"]) for i in range(case["head_dim"] // 2)]
    C.log(f"  yarn expected attention_scaling={scale:.9g} inv_freq="
          + "[" + ", ".join(f"{x:.6g}" for x in expected) + "]")
    for name, mod in rot:
        got = mod.inv_freq.detach().to(torch.float64).tolist()
        if getattr(mod, "rope_type", "yarn") != "yarn":
            raise RuntimeError(f"{name}: rope_type={mod.rope_type}, YaRN not applied")
        if abs(float(mod.attention_scaling) - scale) > 1e-6:
            raise RuntimeError(f"{name}: attention_scaling={mod.attention_scaling}, want {scale}")
        if all(abs(g - d) <= 1e-6 * d for g, d in zip(got, default)):
            raise RuntimeError(f"{name}: inv_freq equals the unscaled RoPE frequencies")
        worst = max(abs(g - e) / e for g, e in zip(got, expected))
        if len(got) != len(expected) or worst > 1e-5:
            problems.add(case["name"], f"YaRN inv_freq differs from the formula (rel {worst:.2e})")


# ------------------------------------------------------------------ saving


def save_sharded(model, path, shards):
    """Saves with max_shard_size chosen so that exactly `shards` files come out."""
    seen, total = set(), 0
    for t in model.state_dict().values():
        if t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()
    for fraction in (0.6, 0.55, 0.65, 0.5, 0.7, 0.75, 0.8):
        limit = int(total * fraction / (shards - 1)) if shards > 1 else total
        C.save_pretrained(model, path, max_shard_size=limit)
        files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
        want = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
        if files == want and os.path.exists(os.path.join(path, "model.safetensors.index.json")):
            C.log(f"  sharded with max_shard_size={limit} bytes ({total} total): {files}")
            return
    raise RuntimeError(f"could not produce {shards} shards (last try gave {files})")


def write_configs(model, case, path):
    moe = case["arch"] == "qwen3_moe"
    cfg = C.hub_config(model, QWEN3_MOE_KEYS if moe else QWEN3_KEYS, style="legacy",
                       dtype_key=case["dtype"], required=REQUIRED_KEYS)
    C.write_json(os.path.join(path, "config.json"), cfg)
    vocab = case["vocab"]
    eos = [vocab - 1, vocab - 2] if case.get("gen_eos") == "list" else vocab - 1
    C.write_json(os.path.join(path, "generation_config.json"), C.generation_config(vocab - 2, eos, vocab - 2))


# --------------------------------------------------------------- references


def prompt_lengths(case):
    return case.get("prompts", DEFAULT_PROMPTS)


def reference(model, model32, case, probe):
    """The reference JSON object for one model (see README.md for the format)."""
    name, vocab = case["name"], case["vocab"]
    prompts = []
    for n in prompt_lengths(case):
        ids = C.random_tokens(n, vocab, name, "prompt", n)
        if probe:
            probe.reset()
        lp = C.logprobs(model, ids)
        entry = {
            "tokens": ids,
            "top": [C.top_pairs(lp[i]) for i in range(n)],
            "next_logprob": C.next_logprobs(lp, ids),
        }
        if probe:
            entry["min_router_gap"] = C.rnd(probe.min_gap)
        # Stay inside the declared context: the YaRN case has max_position_embeddings 128.
        steps = max(0, min(C.GREEDY_STEPS, case["max_pos"] - n))
        entry["greedy"], entry["greedy_margin"] = C.greedy(model, ids, steps)
        entry["f32_max_abs_diff"] = C.rnd(C.max_top_diff(lp, C.logprobs(model32, ids)))
        prompts.append((entry, lp))
    return prompts


# --------------------------------------------------------------------- case


def run_case(case, outdir, problems):
    timer = C.Timer()
    name = case["name"]
    C.log(f"\n=== {name} ({case['arch']}, {case['dtype']})")
    module, model_name, config_name = ARCHS[case["arch"]]
    _, model_cls, config_cls = C.import_arch(module, model_name, config_name)

    model = C.build_model(model_cls, make_config(case, config_cls))
    C.log(f"  built {model_name}: attn={model.config._attn_implementation} "
          f"experts={getattr(model.config, '_experts_implementation', None)}")
    report, norms = C.perturb_model(model, name, case["hidden"], case["tied"])
    C.check_tied(model, case["tied"])
    C.log(f"  perturbed parameters: {dict(sorted(report.items()))}; norm conventions {norms}")
    if report.get("other") or report.get("norm_unknown"):
        problems.add(name, f"unclassified parameters: {dict(report)}")
    history = C.calibrate_output_scale(model, C.random_tokens(24, case["vocab"], name, "calibration"),
                                       case["vocab"])
    C.log(f"  output-scale calibration, mean entropy per step: {[round(h, 3) for h in history]}"
          f" (log V = {math.log(case['vocab']):.3f})")
    if "yarn" in case:
        check_yarn(model, case, problems)

    path = os.path.join(outdir, "models", name)
    C.cast_parameters(model, C.DTYPES[case["dtype"]])
    if case.get("shards"):
        save_sharded(model, path, case["shards"])
    else:
        C.save_pretrained(model, path)
    C.cast_parameters(model, torch.float64)  # now holds exactly the stored values

    layout = C.expert_layout(C.checkpoint_tensors(path))
    if case["arch"] == "qwen3_moe" and layout != "per_expert":
        C.log(f"  save_pretrained wrote experts as '{layout}'; rewriting to Hub per-expert tensors")
        C.rewrite_checkpoint(path, C.experts_to_per_expert)
    write_configs(model, case, path)
    C.check_config_file(os.path.join(path, "config.json"), problems, name)

    tensors = C.checkpoint_tensors(path)
    C.verify_names(tensors, expected_shapes(case), case["dtype"], problems, name)
    if case.get("print_tensors"):
        C.log(f"  tensors of {name}:")
        C.print_tensor_table(tensors)

    loaded, info = C.load_pretrained(model_cls, path, torch.float64)
    issues = C.loading_problems(info, tied=case["tied"])
    if issues:
        raise RuntimeError(f"reload reported {issues}")
    C.check_tied(loaded, case["tied"])
    probe_ids = C.random_tokens(prompt_lengths(case)[1], case["vocab"], name, "reload")
    diff, rope_ok = C.compare_models(model, loaded, probe_ids)
    C.log(f"  reload from disk: max |logit diff| vs in-memory = {diff:.3g}, rotary identical = {rope_ok}")
    if diff > 1e-9 or not rope_ok:
        raise RuntimeError(f"reloaded model differs (logit diff {diff}, rotary identical {rope_ok})")
    if "yarn" in case:
        check_yarn(loaded, case, problems)
    del model

    model32, _ = C.load_pretrained(model_cls, path, torch.float32)
    probe = C.RouterGapProbe(loaded, case["top_k"]) if case["arch"] == "qwen3_moe" else None
    entries = reference(loaded, model32, case, probe)
    if probe:
        probe.close()
    versions = C.versions()
    ref = {"model": name, "arch": model_name, "weights_dtype": case["dtype"], **versions,
           "prompts": [e for e, _ in entries]}
    os.makedirs(os.path.join(outdir, "reference"), exist_ok=True)
    C.write_json(os.path.join(outdir, "reference", f"{name}.json"), ref, compact=True)

    row = C.summary_row(case, entries, tensors, path)
    if not 0.15 <= row["h_all_frac"] <= 0.85:
        problems.add(name, f"mean next-token entropy is {row['h_all_frac']:.2f} x log(V)")
    C.log(f"  wrote {name}: {len(tensors)} tensors, {row['kb']:.0f} KiB, reference "
          f"{os.path.getsize(os.path.join(outdir, 'reference', name + '.json')) / 1024:.0f} KiB, {timer}")
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
    C.log(f"make_fixtures: {C.versions()} -> {outdir}")
    problems, rows, failed = C.Problems(), [], []
    for case in CASES:
        try:
            rows.append(run_case(case, outdir, problems))
        except Exception:  # keep going: one broken case must not cost the others
            traceback.print_exc()
            failed.append(case["name"])
            sys.stdout.flush()
    v = C.versions()
    C.update_source_md(outdir, "make_fixtures", f"""
## Qwen3 / Qwen3-MoE fixtures (tests/reference/make_fixtures.py)

Tiny random-weight models built with transformers {v['transformers']} (torch {v['torch']}) classes
`Qwen3ForCausalLM` / `Qwen3MoeForCausalLM`, every parameter overwritten from fixed seeds, saved in the
Hub layout; `reference/<name>.json` holds float64 CPU log-probs from the reloaded checkpoints.
Generated data, no third-party content. Regenerate: `python3 tests/reference/make_fixtures.py OUTDIR`.
Cases: {", ".join(r["name"] for r in rows)}.
""")
    C.print_summary(rows, failed, outdir, problems)
    return 1 if failed or problems.items else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
