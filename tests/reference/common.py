"""Shared helpers for make_fixtures.py and make_hybrid_fixtures.py (see README.md).

Everything runs on CPU in float64 with fixed seeds so the references are
deterministic. The helpers are grouped by concern: randomness, parameter
perturbation, output-scale calibration, reference computation, checkpoint
layout (safetensors headers, expert layouts, shards), config files, reload
checks and reporting.
"""

from __future__ import annotations

import os

# The GPU machine has no network: make every Hub lookup fail fast instead of
# waiting on DNS, and keep optional kernel downloads from being attempted.
for _key, _value in (
    ("HF_HUB_OFFLINE", "1"),
    ("TRANSFORMERS_OFFLINE", "1"),
    ("HF_HUB_DISABLE_TELEMETRY", "1"),
    ("TOKENIZERS_PARALLELISM", "false"),
):
    os.environ.setdefault(_key, _value)

import importlib  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402
import zlib  # noqa: E402
from collections import Counter, defaultdict  # noqa: E402

import torch  # noqa: E402

TOP_K = 10  # pairs recorded per position
GREEDY_STEPS = 12
ROUND_DIGITS = 9  # log-probs are rounded to 1e-9 in the JSON
NORM_STD = 0.2  # RMSNorm weights: 1 + 0.2*randn, or 0.2*randn for (1 + w) norms
# Per-head decay rates A = exp(A_log) for gated-delta layers, spread so some
# heads remember across several 64-token chunks and some forget within a few
# tokens (the recurrent state then matters at every chunk boundary).
A_LOG_BASE = (0.008, 0.03, 0.12, 0.5)
ENTROPY_TARGET_FRACTION = 0.4  # target mean next-token entropy, as a fraction of log(vocab)

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
DTYPE_NAMES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}
SAFETENSORS_DTYPES = {"f32": "F32", "bf16": "BF16", "f16": "F16"}


# ---------------------------------------------------------------- reporting


def log(*parts):
    """Prints with flush so progress is visible when stdout is a pipe."""
    print(*parts, flush=True)


class Problems:
    """Collects non-fatal problems; any entry makes the script exit non-zero."""

    def __init__(self):
        self.items = []

    def add(self, model, message):
        self.items.append((model, message))
        log(f"PROBLEM [{model}]: {message}")


class Timer:
    def __init__(self):
        self.start = time.time()

    def __str__(self):
        return f"{time.time() - self.start:.1f}s"


# --------------------------------------------------------------- randomness


def seed_for(*keys) -> int:
    """A stable 31-bit seed from any keys (independent of PYTHONHASHSEED)."""
    return zlib.crc32("\x1f".join(str(k) for k in keys).encode("utf-8")) & 0x7FFFFFFF


def randn(shape, *keys) -> torch.Tensor:
    """Standard normal float64 tensor; the same keys always give the same values."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed_for(*keys))
    return torch.randn(tuple(int(s) for s in shape), generator=gen, dtype=torch.float64)


def random_tokens(length, vocab, *keys) -> list:
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed_for("tokens", *keys))
    return torch.randint(0, int(vocab), (int(length),), generator=gen).tolist()


# --------------------------------------------------------- transformers glue


def import_arch(arch, *names):
    """(modeling module, classes...) for transformers.models.<arch>.

    Classes are looked up in the modeling module, then the configuration
    module, then the top-level transformers namespace.
    """
    modeling = importlib.import_module(f"transformers.models.{arch}.modeling_{arch}")
    places = [modeling, f"transformers.models.{arch}.configuration_{arch}", "transformers"]
    found = []
    for name in names:
        for place in places:
            module = importlib.import_module(place) if isinstance(place, str) else place
            if hasattr(module, name):
                found.append(getattr(module, name))
                break
        else:
            raise ImportError(f"cannot find {name} for transformers.models.{arch}")
    return [modeling, *found]


def versions():
    import transformers

    return {"transformers": transformers.__version__, "torch": torch.__version__.split("+")[0]}


def quiet_transformers():
    import transformers

    transformers.logging.set_verbosity_error()


def build_model(model_cls, config):
    """Builds a fresh model on CPU in float64 with eager attention/experts."""
    model = model_cls(config)
    model.to(torch.float64)
    model.eval()
    force_eager(model)
    return model


def cast_parameters(model, dtype):
    """Casts parameters only: model.to(dtype) would also round the RoPE inv_freq buffers."""
    with torch.no_grad():
        for param in model.parameters():  # tied weights appear once, so ties survive
            param.data = param.data.to(dtype)


def force_eager(model):
    """Makes sure attention and MoE experts use the plain eager code paths.

    The default experts implementation is grouped_mm, which is not the
    reference loop and may not support float64 on CPU.
    """
    cfg = model.config
    if getattr(cfg, "_attn_implementation", "eager") != "eager":
        if hasattr(model, "set_attn_implementation"):
            model.set_attn_implementation("eager")
        else:
            cfg._attn_implementation = "eager"
    if getattr(cfg, "_experts_implementation", None) not in (None, "eager"):
        if hasattr(model, "set_experts_implementation"):
            model.set_experts_implementation("eager")
        else:
            cfg._experts_implementation = "eager"
    attn = getattr(cfg, "_attn_implementation", None)
    experts = getattr(cfg, "_experts_implementation", None)
    if attn != "eager" or experts not in (None, "eager"):
        raise RuntimeError(f"could not force eager paths (attn={attn}, experts={experts})")
    return attn, experts


def load_pretrained(model_cls, model_dir, dtype):
    """from_pretrained with eager paths; returns (model, loading_info dict)."""
    kwargs = dict(attn_implementation="eager", experts_implementation="eager", output_loading_info=True)
    try:
        model, info = model_cls.from_pretrained(model_dir, dtype=dtype, **kwargs)
    except TypeError as err:  # very old signature: torch_dtype instead of dtype
        log(f"  from_pretrained(dtype=...) failed ({err}); retrying with torch_dtype")
        model, info = model_cls.from_pretrained(model_dir, torch_dtype=dtype, **kwargs)
    model.eval()
    force_eager(model)
    if not isinstance(info, dict):
        info = {k: getattr(info, k) for k in dir(info) if k.endswith(("_keys", "_msgs", "_errors"))}
    return model, info


def rotary_modules(model):
    """(name, module) for every rotary-embedding module (they own inv_freq)."""
    return [(n, m) for n, m in model.named_modules() if hasattr(m, "inv_freq") and hasattr(m, "attention_scaling")]


def describe_rotary(model):
    out = []
    for name, mod in rotary_modules(model):
        inv = mod.inv_freq.detach().to(torch.float64)
        out.append(
            f"{name or '<root>'}: rope_type={getattr(mod, 'rope_type', '?')} "
            f"attention_scaling={float(mod.attention_scaling):.9g} inv_freq[{inv.numel()}]="
            + "[" + ", ".join(f"{v:.6g}" for v in inv.tolist()) + "]"
        )
    return out


# ------------------------------------------------------ parameter perturbation


def param_kind(name, tensor, owner) -> str:
    """Classifies a parameter by its Hub name and owning module."""
    if name.endswith("embed_tokens.weight"):
        return "embedding"
    if name.endswith("lm_head.weight"):
        return "lm_head"
    if name.endswith("A_log"):
        return "a_log"
    if name.endswith("dt_bias"):
        return "dt_bias"
    if name.endswith("conv1d.weight"):
        return "conv"
    if name.endswith("experts.gate_up_proj"):
        return "experts_gate_up"
    if name.endswith("experts.down_proj"):
        return "experts_down"
    if tensor.dim() == 1 and "norm" in type(owner).__name__.lower():
        # The model's own init tells which convention the norm uses:
        # Qwen3 norms multiply by w (init 1), Qwen3-Next/3.5 ones by (1 + w) (init 0).
        if bool(torch.all(tensor == 0)):
            return "norm_zero"
        if bool(torch.all(tensor == 1)):
            return "norm_one"
        return "norm_unknown"
    if name.endswith("mlp.gate.weight"):
        return "router"
    if name.endswith(".bias"):
        return "bias"
    if tensor.dim() == 2 and name.endswith(".weight"):
        if re.search(r"(o_proj|down_proj|out_proj)\.weight$", name):
            return "linear_out"
        return "linear"
    return "other"


def new_value(kind, name, shape, current, seed, emb_std, out_std):
    """The perturbed float64 value of one parameter (see README for the scales)."""
    noise = randn(shape, seed, name)
    if kind == "embedding":
        return noise * emb_std
    if kind == "lm_head":
        return noise * out_std
    if kind == "norm_one":
        return 1.0 + NORM_STD * noise
    if kind == "norm_zero":
        return NORM_STD * noise
    if kind == "a_log":
        base = torch.tensor([math.log(A_LOG_BASE[h % len(A_LOG_BASE)]) for h in range(shape[0])], dtype=torch.float64)
        return base + 0.2 * noise
    if kind == "dt_bias":
        return 0.5 * noise
    if kind == "conv":
        return noise / math.sqrt(shape[-1])
    if kind == "experts_gate_up":  # [experts, 2*inter, hidden]
        return noise / math.sqrt(shape[-1])
    if kind == "experts_down":  # [experts, hidden, inter]
        return 0.7 * noise / math.sqrt(shape[-1])
    if kind == "router":  # wider logits keep top-k choices away from near-ties
        return 1.5 * noise / math.sqrt(shape[-1])
    if kind == "linear":
        return noise / math.sqrt(shape[-1])
    if kind == "linear_out":
        return 0.7 * noise / math.sqrt(shape[-1])
    if kind == "bias":
        return 0.1 * noise
    if kind == "norm_unknown":  # reported as a problem; guess the convention from the init values
        return (1.0 if float(current.abs().mean()) > 0.5 else 0.0) + NORM_STD * noise
    # other: keep the init and add noise so nothing stays at its default (reported as a problem).
    return current.to(torch.float64) + 0.1 * noise


def perturb_model(model, seed, hidden_size, tied):
    """Overwrites every parameter from a seeded generator.

    Returns a report {kind: count} plus per-norm-class conventions. The output
    scale (lm_head, or the tied embedding) starts at an educated guess and is
    tuned afterwards by calibrate_output_scale.
    """
    out_std = 2.8 / math.sqrt(hidden_size)
    emb_std = out_std if tied else 1.0
    report = Counter()
    norm_classes = defaultdict(set)
    with torch.no_grad():
        for name, param in model.named_parameters():  # tied weights appear once
            owner_name = name.rpartition(".")[0]
            owner = model.get_submodule(owner_name) if owner_name else model
            kind = param_kind(name, param.data, owner)
            if kind.startswith("norm"):
                norm_classes[type(owner).__name__].add(kind)
            value = new_value(kind, name, param.shape, param.data, seed, emb_std, out_std)
            param.data.copy_(value.to(param.dtype))
            report[kind] += 1
    return report, {k: sorted(v) for k, v in norm_classes.items()}


def check_tied(model, tied):
    """The tied models must share one tensor for embed_tokens and lm_head."""
    emb = model.get_input_embeddings().weight
    out = model.get_output_embeddings().weight
    shared = emb.data_ptr() == out.data_ptr()
    if tied != shared:
        raise RuntimeError(f"tie_word_embeddings={tied} but embeddings shared={shared}")


# ------------------------------------------------------- output calibration


@torch.no_grad()
def logprobs(model, ids, **kwargs) -> torch.Tensor:
    """float64 log-softmax of a full forward over ids (no cache): [len(ids), vocab]."""
    out = model(input_ids=torch.tensor([list(ids)], dtype=torch.long), use_cache=False, **kwargs)
    return torch.log_softmax(out.logits[0].to(torch.float64), dim=-1)


def entropies(lp) -> torch.Tensor:
    return -(lp.exp() * lp).sum(-1)


def calibrate_output_scale(model, ids, vocab, max_iter=10):
    """Scales the output projection until the mean entropy is near the target.

    With rows of lm_head i.i.d. Gaussian, logits at a position are Gaussian
    with std s; entropy is roughly log(V) - s^2/2, so s^2 is rescaled in
    proportion to (log V - target) / (log V - measured). Returns the history.
    """
    weight = model.get_output_embeddings().weight
    logv = math.log(vocab)
    target = ENTROPY_TARGET_FRACTION * logv
    history = []
    for _ in range(max_iter):
        h = float(entropies(logprobs(model, ids)).mean())
        history.append(h)
        if abs(h - target) <= 0.04 * logv:
            break
        factor = math.sqrt((logv - target) / max(logv - h, 1e-3))
        with torch.no_grad():
            weight.mul_(min(max(factor, 0.5), 2.0))
    return history


# ------------------------------------------------------ reference computation


def top_raw(row, k):
    """The k best (id, logprob) of one row, ties broken by the lower id."""
    kk = min(row.numel(), k + 8)
    vals, idx = torch.topk(row, kk)
    pairs = sorted(zip(idx.tolist(), vals.tolist()), key=lambda p: (-p[1], p[0]))
    return pairs[:k]


def rnd(value) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"non-finite log-prob {value}")
    return round(value, ROUND_DIGITS)


def top_pairs(row, k=TOP_K):
    return [[int(i), rnd(v)] for i, v in top_raw(row, k)]


def next_logprobs(lp, ids):
    return [rnd(lp[i, ids[i + 1]]) for i in range(len(ids) - 1)]


def greedy(model, ids, steps=GREEDY_STEPS):
    """Greedy continuation by re-running the whole sequence each step (no cache).

    EOS is not special here: exactly `steps` tokens are produced.
    """
    seq = list(ids)
    chosen, margins = [], []
    for _ in range(steps):
        row = logprobs(model, seq)[-1]
        (i1, v1), (_, v2) = top_raw(row, 2)
        chosen.append(int(i1))
        margins.append(rnd(v1 - v2))
        seq.append(int(i1))
    return chosen, margins


class RouterGapProbe:
    """Records, for MoE routers, the smallest logit gap between the k-th and (k+1)-th expert.

    A tiny gap means a float32 engine may legitimately pick a different expert
    there; tests can skip such prompts. The logits are recomputed in float64
    from the router's input, so this does not depend on the router's output API.
    """

    def __init__(self, model, top_k):
        self.top_k = int(top_k)
        self.handles = []
        self.min_gap = math.inf
        self.routers = 0
        for name, mod in model.named_modules():
            weight = getattr(mod, "weight", None)
            if name.endswith("mlp.gate") and isinstance(weight, torch.Tensor) and weight.dim() == 2:
                self.routers += 1
                try:
                    h = mod.register_forward_pre_hook(self._hook, with_kwargs=True)
                except TypeError:  # torch < 2.0
                    h = mod.register_forward_pre_hook(lambda m, a: self._hook(m, a, {}))
                self.handles.append(h)

    def _hook(self, mod, args, kwargs):
        x = args[0] if args else next((v for v in kwargs.values() if isinstance(v, torch.Tensor)), None)
        if x is None:
            return None
        logits = x.reshape(-1, mod.weight.shape[1]).to(torch.float64) @ mod.weight.to(torch.float64).T
        if logits.shape[-1] > self.top_k:
            top = torch.topk(logits, self.top_k + 1, dim=-1).values
            self.min_gap = min(self.min_gap, float((top[:, -2] - top[:, -1]).min()))
        return None

    def reset(self):
        self.min_gap = math.inf

    def close(self):
        for h in self.handles:
            h.remove()
        self.handles = []


def max_top_diff(lp_a, lp_b, k=TOP_K):
    """Largest |a - b| over the k best ids (of a) at every position."""
    worst = 0.0
    for pos in range(lp_a.shape[0]):
        ids = [i for i, _ in top_raw(lp_a[pos], k)]
        worst = max(worst, float((lp_a[pos, ids] - lp_b[pos, ids]).abs().max()))
    return worst


# ------------------------------------------------------- checkpoint layout


def read_safetensors_header(path):
    """Parses a safetensors header without the library: ({name: info}, metadata)."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: truncated header length")
        (n,) = struct.unpack("<Q", raw)
        header = json.loads(f.read(n).decode("utf-8"))
    size = os.path.getsize(path)
    meta = header.pop("__metadata__", {}) or {}
    end = 0
    for name, info in header.items():
        begin, stop = info["data_offsets"]
        if not 0 <= begin <= stop or 8 + n + stop > size:
            raise ValueError(f"{path}: {name} offsets {info['data_offsets']} out of range")
        end = max(end, stop)
    if 8 + n + end != size:
        raise ValueError(f"{path}: data ends at {8 + n + end}, file has {size} bytes")
    return header, meta


def checkpoint_files(model_dir):
    """(sorted safetensors file names, weight_map or None)."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        return sorted(set(weight_map.values())), weight_map
    if os.path.exists(os.path.join(model_dir, "model.safetensors")):
        return ["model.safetensors"], None
    raise FileNotFoundError(f"{model_dir}: no model.safetensors[.index.json]")


def checkpoint_tensors(model_dir):
    """{name: (dtype, shape, file)} over all shards; checks the index matches."""
    files, weight_map = checkpoint_files(model_dir)
    tensors = {}
    for fn in files:
        header, _ = read_safetensors_header(os.path.join(model_dir, fn))
        for name, info in header.items():
            if name in tensors:
                raise ValueError(f"{name} appears in {tensors[name][2]} and {fn}")
            tensors[name] = (info["dtype"], list(info["shape"]), fn)
    if weight_map is not None:
        mapped = {k: v for k, v in weight_map.items()}
        actual = {k: v[2] for k, v in tensors.items()}
        if mapped != actual:
            diff = sorted(set(mapped.items()) ^ set(actual.items()))[:10]
            raise ValueError(f"index weight_map disagrees with shard contents, e.g. {diff}")
    return tensors


_FUSED_GATE_UP = re.compile(r"^(?P<p>.*\.experts)\.gate_up_proj$")
_FUSED_DOWN = re.compile(r"^(?P<p>.*\.experts)\.down_proj$")
_PER_EXPERT = re.compile(r"^(?P<p>.*\.experts)\.(?P<e>\d+)\.(?P<w>gate_proj|up_proj|down_proj)\.weight$")


def experts_to_per_expert(sd):
    """Splits fused [E, 2I, H] gate_up / [E, H, I] down tensors into Hub per-expert 2-D tensors."""
    out = {}
    for key, t in sd.items():
        m = _FUSED_GATE_UP.match(key)
        if m and t.dim() == 3:
            if t.shape[1] % 2:
                raise ValueError(f"{key}: odd fused gate_up size {tuple(t.shape)}")
            inter = t.shape[1] // 2
            for e in range(t.shape[0]):
                out[f"{m['p']}.{e}.gate_proj.weight"] = t[e, :inter].clone().contiguous()
                out[f"{m['p']}.{e}.up_proj.weight"] = t[e, inter:].clone().contiguous()
            continue
        m = _FUSED_DOWN.match(key)
        if m and t.dim() == 3:
            for e in range(t.shape[0]):
                out[f"{m['p']}.{e}.down_proj.weight"] = t[e].clone().contiguous()
            continue
        out[key] = t
    return out


def experts_to_fused(sd):
    """Stacks Hub per-expert tensors into fused gate_up_proj [E, 2I, H] and down_proj [E, H, I]."""
    groups = defaultdict(dict)
    out = {}
    for key, t in sd.items():
        m = _PER_EXPERT.match(key)
        if m:
            groups[m["p"]][(int(m["e"]), m["w"])] = t
        else:
            out[key] = t
    for prefix, parts in groups.items():
        count = 1 + max(e for e, _ in parts)
        need = [(e, w) for e in range(count) for w in ("gate_proj", "up_proj", "down_proj")]
        missing = [p for p in need if p not in parts]
        if missing:
            raise ValueError(f"{prefix}: missing expert tensors {missing[:5]}")
        out[f"{prefix}.gate_up_proj"] = torch.stack(
            [torch.cat([parts[(e, "gate_proj")], parts[(e, "up_proj")]], 0) for e in range(count)]
        ).contiguous()
        out[f"{prefix}.down_proj"] = torch.stack([parts[(e, "down_proj")] for e in range(count)]).contiguous()
    return out


def expert_layout(names) -> str:
    """'per_expert', 'fused', 'none' or 'mixed' for a set of tensor names."""
    fused = any(_FUSED_GATE_UP.match(n) or _FUSED_DOWN.match(n) for n in names)
    per = any(_PER_EXPERT.match(n) for n in names)
    return {(False, False): "none", (True, False): "fused", (False, True): "per_expert"}.get((fused, per), "mixed")


def rewrite_checkpoint(model_dir, transform):
    """Applies transform(state_dict) -> state_dict to every shard, keeping the index in step."""
    from safetensors.torch import load_file, save_file

    files, weight_map = checkpoint_files(model_dir)
    new_map = {}
    total = 0
    for fn in files:
        path = os.path.join(model_dir, fn)
        _, meta = read_safetensors_header(path)
        sd = transform(load_file(path))
        sd = {k: v.contiguous() for k, v in sd.items()}
        save_file(sd, path, metadata=dict(meta) or {"format": "pt"})
        for k, v in sd.items():
            new_map[k] = fn
            total += v.numel() * v.element_size()
    if weight_map is not None:
        index_path = os.path.join(model_dir, "model.safetensors.index.json")
        with open(index_path) as f:
            index = json.load(f)
        index.setdefault("metadata", {})["total_size"] = total
        index["weight_map"] = dict(sorted(new_map.items()))
        with open(index_path, "w") as f:
            json.dump(index, f, indent=2, sort_keys=True)
            f.write("\n")


def verify_names(tensors, expected_shapes, dtype_key, problems, model_name):
    """Compares the checkpoint against the Hub layout expected for the case.

    expected_shapes: {name: shape}. Names, shapes and the storage dtype must
    all match; any difference is reported as a problem (the fixture is kept).
    """
    want_dtype = SAFETENSORS_DTYPES[dtype_key]
    actual = set(tensors)
    expected = set(expected_shapes)
    ok = True
    if actual != expected:
        ok = False
        problems.add(
            model_name,
            f"tensor names differ from the Hub layout: missing {sorted(expected - actual)[:8]} "
            f"unexpected {sorted(actual - expected)[:8]}",
        )
    bad_shape = [f"{n} {tensors[n][1]} (want {list(expected_shapes[n])})" for n in sorted(actual & expected)
                 if list(tensors[n][1]) != list(expected_shapes[n])]
    bad_dtype = [f"{n} {tensors[n][0]}" for n in sorted(actual) if tensors[n][0] != want_dtype]
    if bad_shape:
        ok = False
        problems.add(model_name, f"{len(bad_shape)} tensors have unexpected shapes, e.g. {bad_shape[:3]}")
    if bad_dtype:
        ok = False
        problems.add(model_name, f"{len(bad_dtype)} tensors not stored as {want_dtype}, e.g. {bad_dtype[:3]}")
    return ok


def print_tensor_table(tensors, limit=None):
    names = sorted(tensors)
    for name in names[: limit or len(names)]:
        dt, shape, fn = tensors[name]
        log(f"    {name:60s} {dt:5s} {str(shape):18s} {fn}")
    if limit and len(names) > limit:
        log(f"    ... {len(names) - limit} more")


def dir_size(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


# ---------------------------------------------------------------- configs


_MISSING = object()


def hub_config(model, keys, *, style, dtype_key, required=(), extra=None):
    """The config.json dict, written the way the Hub checkpoints of this family are.

    style "legacy": rope_theta + rope_scaling (+ top-level partial_rotary_factor)
    and torch_dtype, as in the Qwen3 / Qwen3-MoE / Qwen3-Next repos.
    style "v5": rope_parameters and dtype, as in the Qwen3.5 repos.
    Only the listed keys are written (explicitly, even when they equal the
    transformers default) so the file does not depend on transformers' diffing.
    """
    import transformers

    cfg = model.config
    out = {}
    for key in keys:
        value = getattr(cfg, key, _MISSING)
        if value is _MISSING:
            if key in required:
                raise KeyError(f"config has no {key}")
            continue
        if value is None and key not in ("sliding_window",):
            continue
        out[key] = _jsonable(value)
    rope = _global_rope(getattr(cfg, "rope_parameters", None))
    if style == "legacy":
        theta = rope.pop("rope_theta", None)
        if theta is None:
            raise KeyError("rope_parameters has no rope_theta")
        partial = rope.pop("partial_rotary_factor", None)
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        out["rope_theta"] = _int_if_integral(theta)
        out["rope_scaling"] = None if rope_type == "default" and set(rope) <= {"rope_type", "type"} else rope
        if partial is not None and "partial_rotary_factor" in keys:
            out["partial_rotary_factor"] = partial
        out["torch_dtype"] = DTYPE_NAMES[dtype_key]
    elif style == "v5":
        rope["rope_theta"] = _int_if_integral(rope["rope_theta"])
        out["rope_parameters"] = rope
        out["dtype"] = DTYPE_NAMES[dtype_key]
    else:
        raise ValueError(style)
    out["architectures"] = [type(model).__name__]
    out["model_type"] = cfg.model_type
    out["transformers_version"] = transformers.__version__
    out.update(extra or {})
    return out


def _global_rope(rope):
    rope = dict(rope or {})
    if rope and all(isinstance(v, dict) for v in rope.values()):
        # Nested per layer type: Qwen models use one set for every attention layer.
        rope = dict(rope.get("full_attention") or next(iter(rope.values())))
    return {k: _jsonable(v) for k, v in rope.items() if v is not None}


def _int_if_integral(x):
    return int(x) if isinstance(x, float) and x.is_integer() else x


def _jsonable(value):
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, torch.dtype):
        return str(value).split(".")[-1]
    return value


def full_attention_interval(layer_types):
    """k such that layer i is full attention iff (i + 1) % k == 0, else None."""
    n = len(layer_types)
    for k in range(1, n + 1):
        if all((lt == "full_attention") == ((i + 1) % k == 0) for i, lt in enumerate(layer_types)):
            return k
    return None


def write_json(path, obj, compact=False):
    with open(path, "w") as f:
        if compact:
            json.dump(obj, f, separators=(",", ":"), allow_nan=False)
        else:
            json.dump(obj, f, indent=2, sort_keys=True, allow_nan=False)
        f.write("\n")


def generation_config(bos, eos, pad):
    import transformers

    return {
        "bos_token_id": bos,
        "do_sample": True,
        "eos_token_id": eos,
        "pad_token_id": pad,
        "temperature": 0.7,
        "top_k": 20,
        "top_p": 0.8,
        "transformers_version": transformers.__version__,
    }


def check_config_file(path, problems, name):
    with open(path) as f:
        cfg = json.load(f)
    for key in ("architectures", "head_dim", "model_type", "vocab_size", "hidden_size"):
        if key not in cfg:
            problems.add(name, f"config.json lacks {key}")
    if "torch_dtype" not in cfg and "dtype" not in cfg:
        problems.add(name, "config.json lacks torch_dtype/dtype")
    return cfg


def save_pretrained(model, path, max_shard_size=None):
    """save_pretrained into a fresh directory (safetensors is the only format in transformers 5)."""
    if os.path.isdir(path):
        shutil.rmtree(path)
    kwargs = {"max_shard_size": max_shard_size} if max_shard_size else {}
    try:
        model.save_pretrained(path, safe_serialization=True, **kwargs)
    except TypeError:  # a transformers that no longer takes the flag at all
        model.save_pretrained(path, **kwargs)


# ------------------------------------------------------------ reload checks


def compare_models(mem, loaded, ids):
    """Max |logit difference| between two models on ids, plus rotary equality."""
    with torch.no_grad():
        a = mem(input_ids=torch.tensor([ids]), use_cache=False).logits.to(torch.float64)
        b = loaded(input_ids=torch.tensor([ids]), use_cache=False).logits.to(torch.float64)
    diff = float((a - b).abs().max())
    ra, rb = rotary_modules(mem), rotary_modules(loaded)
    rope_ok = len(ra) == len(rb) and all(
        torch.equal(x.inv_freq.to(torch.float64), y.inv_freq.to(torch.float64))
        and float(x.attention_scaling) == float(y.attention_scaling)
        for (_, x), (_, y) in zip(ra, rb)
    )
    return diff, rope_ok


def loading_problems(info, ignore_prefixes=(), tied=False):
    """Human-readable loading issues.

    Keys starting with ignore_prefixes are skipped, and so is a "missing"
    lm_head.weight of a tied model (the caller checks the tie and the logits).
    """
    issues = []
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs", "conversion_errors"):
        items = info.get(key) or []
        if isinstance(items, dict):
            items = list(items)
        items = [i for i in items if not (isinstance(i, str) and i.startswith(tuple(ignore_prefixes)))]
        if tied and key == "missing_keys":
            items = [i for i in items if i != "lm_head.weight"]
        if items:
            issues.append(f"{key}: {sorted(map(str, items))[:8]}")
    return issues


def forward_accepts(model, name):
    """Whether model.forward (or its inner model's) names a parameter `name`."""
    for fn in (model.forward, getattr(getattr(model, "model", None), "forward", None)):
        if fn is not None and name in inspect.signature(fn).parameters:
            return True
    return False


# ---------------------------------------------------------------- summary


def summary_row(case, entries, tensors, path):
    """One summary line's numbers; entries are (prompt JSON, float64 log-probs)."""
    logv = math.log(case["vocab"])
    first = entries[0][1]
    h0 = float(entropies(first[: min(5, first.shape[0])]).mean())
    top1 = [float(v) for _, lp in entries for v in (lp.max(-1).values.min(), lp.max(-1).values.max())]
    nxt = [x for e, _ in entries for x in e["next_logprob"]]
    margins = [x for e, _ in entries for x in e["greedy_margin"]]
    row = dict(
        name=case["name"], dtype=case["dtype"], tensors=len(tensors), kb=dir_size(path) / 1024,
        h0_frac=h0 / logv, h_all_frac=float(torch.cat([entropies(lp) for _, lp in entries]).mean()) / logv,
        top1=(min(top1), max(top1)), next=(min(nxt), max(nxt)),
        margin=min(margins) if margins else float("nan"),
        f32=max(e["f32_max_abs_diff"] for e, _ in entries),
    )
    gaps = [e["min_router_gap"] for e, _ in entries if "min_router_gap" in e]
    if gaps:
        row["gap"] = min(gaps)
    decode = [e["decode_max_abs_diff"] for e, _ in entries if "decode_max_abs_diff" in e]
    if decode:
        row["decode"] = max(decode)
    return row


def print_summary(rows, failed, outdir, problems):
    """A compact table (the runner shows only the last lines of the log)."""
    log("\n=== summary (H0 = mean entropy of prompt 0's first 5 positions / log V; "
        "f32 = max |f32 - f64| top-10 log-prob; dec = cached decode vs full forward)")
    log(f"{'model':19s} {'dt':4s} {'tens':>4s} {'KiB':>5s} {'H0':>4s} {'top1 lp range':>14s} "
        f"{'next lp range':>15s} {'margin':>7s} {'f32':>7s} {'rgap':>6s} {'dec':>7s}")
    for r in rows:
        gap = f"{r['gap']:.0e}" if "gap" in r else "-"
        dec = f"{r['decode']:.1e}" if "decode" in r else "-"
        log(f"{r['name']:19s} {r['dtype']:4s} {r['tensors']:4d} {r['kb']:5.0f} {r['h0_frac']:4.2f} "
            f"{r['top1'][0]:6.2f}..{r['top1'][1]:5.2f} {r['next'][0]:7.2f}..{r['next'][1]:5.2f} "
            f"{r['margin']:7.4f} {r['f32']:7.1e} {gap:>6s} {dec:>7s}")
    total = 0
    for sub in ("models", "reference"):
        base = os.path.join(outdir, sub)
        for entry in os.listdir(base) if os.path.isdir(base) else []:
            p = os.path.join(base, entry)
            total += dir_size(p) if os.path.isdir(p) else os.path.getsize(p)
    log(f"total size {total / 1024:.0f} KiB; failed: {', '.join(failed) or 'none'}; problems: {len(problems.items)}")
    for model, msg in problems.items[:6]:
        log(f"  PROBLEM [{model}] {msg[:150]}")


# ------------------------------------------------------------- SOURCE.md


def update_source_md(outdir, section, body):
    """Keeps one marked section per generator in OUTDIR/SOURCE.md."""
    path = os.path.join(outdir, "SOURCE.md")
    text = open(path).read() if os.path.exists(path) else "# Generated reference fixtures\n"
    begin, end = f"<!-- begin {section} -->", f"<!-- end {section} -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    with open(path, "w") as f:
        f.write(text)
