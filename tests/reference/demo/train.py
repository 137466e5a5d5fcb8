#!/usr/bin/env python3
"""Stage 2 of the demo-model recipe: train, save and evaluate one model.

  python3 train.py --variant demo|demo-xml --work WORK --out OUT/VARIANT [--deadline EPOCH_SECONDS]

Reads WORK/data-VARIANT.npz, WORK/tokenizer.json and WORK/eval_items.json
(written by prepare.py), trains a Qwen3ForCausalLM from scratch (bf16 autocast,
AdamW, warmup + cosine, loss on assistant tokens only, length-bucketed padded
batches) for a wall-clock budget or a step count, whichever ends first, saves a
Hugging Face checkpoint to OUT/VARIANT (config.json, model.safetensors in BF16
with tied embeddings, generation_config.json, tokenizer.json,
tokenizer_config.json, train_log.txt), then evaluates the saved files
(eval.json) and fills the model card template into OUT/VARIANT/README.md.

The learning-rate schedule follows training progress, which is
max(step / max_steps, elapsed / budget) by default; the log records the step
count, and --steps N replays exactly N steps on a step-based schedule.
"""

import argparse
import json
import math
import os
import shutil
import sys
import time
import traceback

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import corpus  # noqa: E402
import modelcard  # noqa: E402

# Architecture: ~7.3M parameters, ~14.7 MB in BF16 (tied embeddings).
ARCH = dict(hidden_size=256, intermediate_size=768, num_hidden_layers=8, num_attention_heads=4,
            num_key_value_heads=2, head_dim=64, max_position_embeddings=2048, rms_norm_eps=1e-6)
ROPE_THETA = 1000000.0
MAX_BYTES = 15_000_000
GENERIC_CONFIG_KEYS = ("_name_or_path", "_attn_implementation", "_commit_hash", "output_hidden_states",
                       "output_attentions", "return_dict", "chunk_size_feed_forward", "is_encoder_decoder",
                       "id2label", "label2id", "problem_type", "torchscript", "pruned_heads", "tf_legacy_loss",
                       "use_bfloat16", "add_cross_attention", "finetuning_task", "tokenizer_class", "prefix",
                       "sep_token_id", "decoder_start_token_id", "task_specific_params", "cross_attention_hidden_size",
                       "is_decoder", "num_labels")


class Log:
    """Prints and appends to train_log.txt."""

    def __init__(self, path):
        self.t0 = time.time()
        self.f = open(path, "w", encoding="utf-8")

    def __call__(self, *a):
        line = f"[{time.time() - self.t0:7.1f}s] " + " ".join(str(x) for x in a)
        print(line, flush=True)
        self.f.write(line + "\n")
        self.f.flush()


def build_config(vocab_size, eos_id, pad_id):
    """A Qwen3Config for ARCH (rope given in the transformers 5 form, with a fallback to the 4.x form)."""
    from transformers import Qwen3Config
    base = dict(ARCH, vocab_size=vocab_size, tie_word_embeddings=True, attention_bias=False, attention_dropout=0.0,
                hidden_act="silu", initializer_range=0.02, use_cache=True, use_sliding_window=False,
                max_window_layers=ARCH["num_hidden_layers"], bos_token_id=None, eos_token_id=eos_id, pad_token_id=pad_id)
    try:
        cfg = Qwen3Config(**base, rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA})
    except TypeError:
        cfg = Qwen3Config(**base, rope_theta=ROPE_THETA)
    rp = getattr(cfg, "rope_parameters", None) or {}
    theta = rp.get("rope_theta", getattr(cfg, "rope_theta", None))
    if theta is None or abs(float(theta) - ROPE_THETA) > 1e-3:
        raise RuntimeError(f"rope theta not applied: {rp} / {getattr(cfg, 'rope_theta', None)}")
    cfg.architectures = ["Qwen3ForCausalLM"]
    return cfg


def config_json(cfg):
    """config.json text: transformers' own serialization plus the classic Qwen3 keys (rope_theta, torch_dtype)."""
    import transformers
    d = json.loads(cfg.to_json_string(use_diff=False))
    d.update({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "dtype": "bfloat16",
              "torch_dtype": "bfloat16", "rope_theta": ROPE_THETA, "tie_word_embeddings": True, "bos_token_id": None,
              "transformers_version": transformers.__version__})
    d.setdefault("rope_scaling", None)
    for k in GENERIC_CONFIG_KEYS:  # generic PreTrainedConfig fields at their defaults: noise for other readers
        d.pop(k, None)
    return json.dumps(d, indent=2, sort_keys=True) + "\n"


def tokenizer_config(template, added):
    """tokenizer_config.json in the layout of the real Qwen3 one, with this model's chat template."""
    return {
        "add_bos_token": False, "add_prefix_space": False,
        "added_tokens_decoder": {str(i): {"content": c, "lstrip": False, "normalized": False, "rstrip": False,
                                          "single_word": False, "special": sp} for c, i, sp in added},
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None, "chat_template": template, "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>", "errors": "replace", "model_max_length": ARCH["max_position_embeddings"],
        "pad_token": "<|endoftext|>", "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def expected_names(n_layers):
    names = {"model.embed_tokens.weight", "model.norm.weight"}
    for i in range(n_layers):
        p = f"model.layers.{i}."
        names |= {p + s for s in ("input_layernorm.weight", "post_attention_layernorm.weight",
                                  "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                                  "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                                  "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")}
    return names


def save_model(model, cfg, out, work, template, log):
    """Writes the checkpoint files; returns the BF16 tensors that were saved."""
    from safetensors.torch import save_file
    sd = model.state_dict()
    exp = expected_names(cfg.num_hidden_layers)
    if exp <= set(sd):
        keep = exp  # lm_head.weight is tied to model.embed_tokens.weight and omitted, as in the Hub's Qwen3 checkpoints
    else:
        keep = {k for k in sd if k.endswith(".weight") and k != "lm_head.weight"}
        log(f"WARN state dict lacks expected Hub names: missing={sorted(exp - set(sd))[:5]}")
    if set(sd) - keep - {"lm_head.weight"}:
        log(f"note: not saved (non-weights): {sorted(set(sd) - keep - {'lm_head.weight'})[:5]}")
    tensors = {k: sd[k].detach().to(torch.bfloat16).contiguous().cpu() for k in sorted(keep)}
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        f.write(config_json(cfg))
    raw_tok = json.load(open(os.path.join(work, "tokenizer.json"), encoding="utf-8"))
    ids = {t["content"]: t["id"] for t in raw_tok["added_tokens"]}
    import transformers
    gen = {"do_sample": True, "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]], "pad_token_id": ids["<|endoftext|>"],
           "temperature": 0.7, "top_k": 20, "top_p": 0.8, "transformers_version": transformers.__version__}
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")
    shutil.copyfile(os.path.join(work, "tokenizer.json"), os.path.join(out, "tokenizer.json"))
    added = [(t["content"], t["id"], t["special"]) for t in raw_tok["added_tokens"]]
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(template, added), f, ensure_ascii=False, indent=2)
        f.write("\n")
    size = os.path.getsize(os.path.join(out, "model.safetensors"))
    log(f"saved {len(tensors)} tensors, model.safetensors = {size / 1e6:.2f} MB")
    return tensors, size


def compile_for_training(model, mode, log):
    """Applies torch.compile: "none", "layers" (each decoder layer, dynamic shapes: one graph serves all
    eight and every batch shape) or "model" (the whole forward and loss). At hidden size 256 a step is
    bound by the many small elementwise kernels of RMSNorm, RoPE and SwiGLU, which compiling fuses.
    Compile errors fall back to eager execution (suppress_errors), so the recipe never fails on them."""
    if mode == "none":
        return model
    import torch._dynamo
    torch._dynamo.config.suppress_errors = True
    torch._dynamo.config.cache_size_limit = 64
    if mode == "layers":
        for layer in model.model.layers:
            layer.compile(dynamic=True)
        log("compiled: each decoder layer (torch.compile, dynamic shapes)")
        return model
    if mode == "model":
        log("compiled: the whole forward (torch.compile, dynamic shapes)")
        return torch.compile(model, dynamic=True)
    raise SystemExit(f"unknown --compile mode {mode!r}")


def uncompile(model):
    """Undoes compile_for_training's "layers" mode (the fallback after a failed compiled step)."""
    for layer in model.model.layers:
        layer._compiled_call_impl = None


class Batches:
    """Length-bucketed, padded batches of (input_ids, labels) under a token budget."""

    def __init__(self, path, max_tokens, seed, pad_id):
        d = np.load(path)
        self.tokens, self.trained, self.off = d["tokens"], d["trained"], d["offsets"]
        self.lens = self.off[1:] - self.off[:-1]
        self.max_tokens, self.seed, self.pad = max_tokens, seed, pad_id
        self.epoch, self.queue = 0, []

    def plan(self):
        rng = np.random.default_rng(self.seed + self.epoch)
        idx = rng.permutation(len(self.lens))
        out = []
        for chunk in np.array_split(idx, max(1, len(idx) // 4096)):
            chunk = chunk[np.argsort(self.lens[chunk], kind="stable")]
            cur, width = [], 0
            for i in chunk:
                w = max(width, int(self.lens[i]))
                if cur and w * (len(cur) + 1) > self.max_tokens:
                    out.append(cur)
                    cur, w = [], int(self.lens[i])
                cur.append(int(i))
                width = w
            if cur:
                out.append(cur)
        rng.shuffle(out)
        return out

    def next(self):
        if not self.queue:
            self.queue = self.plan()
            self.epoch += 1
        b = self.queue.pop()
        width = int(self.lens[b].max())
        width = (width + 7) // 8 * 8
        x = np.full((len(b), width), self.pad, np.int64)
        y = np.full((len(b), width), -100, np.int64)
        for r, i in enumerate(b):
            s, e = self.off[i], self.off[i + 1]
            x[r, :e - s] = self.tokens[s:e]
            y[r, :e - s] = np.where(self.trained[s:e] == 1, self.tokens[s:e], -100)
        return torch.from_numpy(x), torch.from_numpy(y)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variant", required=True, choices=["demo", "demo-xml"])
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--train-seconds", type=float, default=270.0)
    ap.add_argument("--max-steps", type=int, default=20000)
    ap.add_argument("--steps", type=int, default=0, help="exact step count with a step-based schedule (reproduction)")
    ap.add_argument("--batch-tokens", type=int, default=65536)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.05)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--deadline", type=float, default=0.0, help="epoch seconds by which everything must be written")
    ap.add_argument("--eval-seconds", type=float, default=75.0)
    ap.add_argument("--compile", default=os.environ.get("DEMO_COMPILE", "layers"), choices=["none", "layers", "model"],
                    help="torch.compile mode (DEMO_COMPILE); the committed models were trained with layers")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    log = Log(os.path.join(a.out, "train_log.txt"))
    log(f"variant={a.variant} args={vars(a)}")
    import transformers
    from transformers import Qwen3ForCausalLM
    log(f"torch {torch.__version__} transformers {transformers.__version__} cuda {torch.cuda.is_available()}")
    torch.set_num_threads(4)
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        log(f"device {torch.cuda.get_device_name(0)}")

    with open(os.path.join(a.work, "tokenizer.json"), encoding="utf-8") as f:
        raw_tok = json.load(f)
    ids = {t["content"]: t["id"] for t in raw_tok["added_tokens"]}
    tok_size = len(raw_tok["model"]["vocab"]) + len(raw_tok["added_tokens"])
    vocab_size = max(4096, (tok_size + 63) // 64 * 64)
    cfg = build_config(vocab_size, ids["<|im_end|>"], ids["<|endoftext|>"])
    try:
        cfg._attn_implementation = "sdpa"  # fused causal attention; right padding needs no mask
    except Exception as e:
        log(f"note: could not request sdpa attention ({e})")
    model = Qwen3ForCausalLM(cfg)
    if model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
        log("WARN lm_head was not tied after init; tying it to embed_tokens")
        model.lm_head.weight = model.model.embed_tokens.weight
    n_params = sum(p.numel() for p in model.parameters())
    log(f"Qwen3ForCausalLM {ARCH} vocab={vocab_size} (tokenizer {tok_size}) params={n_params:,} "
        f"bf16={2 * n_params / 1e6:.2f} MB attn={getattr(model.config, '_attn_implementation', '?')}")
    if 2 * n_params > MAX_BYTES:
        raise SystemExit(f"model too large: {2 * n_params} bytes")
    model.to(dev)
    fwd = compile_for_training(model, a.compile, log) if dev.type == "cuda" else model

    data = Batches(os.path.join(a.work, f"data-{a.variant}.npz"), a.batch_tokens, a.seed, ids["<|endoftext|>"])
    log(f"data: {len(data.lens)} examples, {len(data.tokens):,} tokens, {int(data.trained.sum()):,} trained")

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": a.wd}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=dev.type == "cuda")
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.95), eps=1e-8)

    now = time.time()
    budget = a.train_seconds
    if a.deadline:
        budget = min(budget, a.deadline - now - a.eval_seconds - 30)
    if budget < min(30.0, a.train_seconds):
        raise SystemExit(f"not enough time left to train ({budget:.0f}s)")
    max_steps = a.steps or a.max_steps
    log(f"training for min({budget:.0f}s, {max_steps} steps); lr {a.lr} warmup {a.warmup} cosine to {a.min_lr_frac * a.lr:g}")

    def lr_at(step, progress):
        warm = min(1.0, (step + 1) / a.warmup)
        cos = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
        return a.lr * warm * (a.min_lr_frac + (1 - a.min_lr_frac) * cos)

    model.train()
    step, tokens_seen, t_start = 0, 0, time.time()
    win_loss, win_n, win_tok, last_log, loss_hist = torch.zeros((), device=dev), 0, 0, time.time(), []
    while True:
        elapsed = time.time() - t_start
        progress = step / max_steps if a.steps else max(step / max_steps, elapsed / budget)
        if progress >= 1.0 or (a.steps and step >= a.steps) or (not a.steps and elapsed >= budget):
            break
        if a.steps and a.deadline and time.time() > a.deadline - a.eval_seconds - 30:
            log("WARN deadline reached before --steps; stopping early")
            break
        lr = lr_at(step, progress)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = data.next()
        if dev.type == "cuda":  # pinned + non_blocking: the CPU prepares the next batch while the GPU works
            x, y = x.pin_memory(), y.pin_memory()
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        try:
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
                out = fwd(input_ids=x, labels=y, use_cache=False)
            loss = out.loss
            loss.backward()
        except Exception as e:  # a compiled step failed outright: go on eagerly from the same batch
            if a.compile == "none":
                raise
            log(f"WARN compiled step {step} failed ({type(e).__name__}: {str(e)[:300]}); continuing eagerly")
            a.compile, fwd = "none", model
            uncompile(model)
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
                out = model(input_ids=x, labels=y, use_cache=False)
            loss = out.loss
            loss.backward()
        if step == 0:
            log(f"first batch {tuple(x.shape)} loss {loss.item():.3f} (ln V = {math.log(vocab_size):.3f}) "
                f"after {time.time() - t_start:.1f}s (compile: {a.compile})")
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        win_loss += loss.detach()
        win_n += 1
        tokens_seen += x.numel()
        win_tok += x.numel()
        step += 1
        if step % 100 == 0:
            avg = (win_loss / win_n).item()
            if not math.isfinite(avg):
                raise SystemExit(f"loss is not finite at step {step}")
            loss_hist.append(avg)
            dt = time.time() - last_log
            log(f"step {step} loss {avg:.4f} lr {lr:.2e} gnorm {float(gnorm):.2f} epoch {data.epoch} "
                f"{win_tok / dt / 1e3:.0f}k tok/s progress {progress:.2f}")
            win_loss.zero_()
            win_n, win_tok, last_log = 0, 0, time.time()
    train_time = time.time() - t_start
    if win_n:
        loss_hist.append((win_loss / win_n).item())
    final_loss = loss_hist[-1] if loss_hist else -1.0
    log(f"trained {step} steps in {train_time:.0f}s, {tokens_seen / 1e6:.1f}M tokens (padded), "
        f"{data.epoch} epoch(s) started; last loss {final_loss:.4f}; reproduce with --steps {step}")

    model.eval()
    template = corpus.load_templates()[a.variant]
    tensors, size = save_model(model, cfg, a.out, a.work, template, log)
    stats = {"variant": a.variant, "seed": a.seed, "train_steps": step, "train_seconds": round(train_time),
             "train_tokens_m": round(tokens_seen / 1e6, 1), "final_loss": round(final_loss, 4), "parameters": n_params,
             "file_mb": round(size / 1e6, 2), "vocab_size": vocab_size, "tokenizer_size": tok_size,
             "examples": int(len(data.lens)), "epochs": data.epoch, "batch_tokens": a.batch_tokens, "lr": a.lr,
             "compile": a.compile}
    try:
        with open(os.path.join(a.work, "prepare_stats.json")) as f:
            ps = json.load(f)
        stats.update(conversations=ps["n_conversations"], kinds=ps["kinds"], prepare=ps)
    except (OSError, KeyError, ValueError) as e:
        log(f"note: no prepare stats ({e})")

    import evaluate
    with open(os.path.join(a.work, "eval_items.json"), encoding="utf-8") as f:
        items = json.load(f)
    eval_deadline = (a.deadline - 10) if a.deadline else None
    res = None
    try:
        res = evaluate.run(a.out, items, a.variant, log=log, deadline=eval_deadline)
        # The saved weights must load back bit-exactly.
        sd = evaluate.load(a.out, dev)[1].state_dict()
        res["checks"]["weights_roundtrip_exact"] = all(torch.equal(sd[k].cpu(), v) for k, v in tensors.items())
        del sd
    except Exception as e:
        log(f"WARN evaluating the saved files failed: {type(e).__name__}: {e}")
        log(traceback.format_exc())
    if res is None:  # evaluate the in-memory model rather than leave no numbers
        try:
            model.to(torch.bfloat16)
            res = evaluate.run(a.out, items, a.variant, log=log, deadline=eval_deadline, model=model)
        except Exception as e:
            log(f"WARN evaluating the in-memory model failed too: {type(e).__name__}: {e}")
            log(traceback.format_exc())
            res = {"variant": a.variant, "error": f"{type(e).__name__}: {e}", "all_targets_met": False, "metrics": {},
                   "checks": {}, "eval_seconds": 0, "table": f"== {a.variant}: evaluation failed"}
    res["train"] = stats
    with open(os.path.join(a.out, "eval.json"), "w", encoding="utf-8") as f:
        json.dump(res, f, ensure_ascii=False, indent=1)
    log("\n" + res["table"])
    log(f"checks: {res['checks']}")
    try:
        modelcard.fill(a.variant, res, os.path.join(a.out, "README.md"))
    except Exception as e:
        log(f"WARN model card not written: {e}")
    log(f"RESULT {a.variant}: all_targets_met={res['all_targets_met']} steps={step} loss={final_loss:.4f} "
        f"size={size / 1e6:.2f}MB eval={res['eval_seconds']}s")


if __name__ == "__main__":
    main()
