"""Load a K3 Hugging Face checkpoint into K3Model, and export K3Model to that layout.

Layout (spec §2): tensors under `language_model.`; routed experts as MXFP4
(`experts.{e}.w{1,2,3}.weight_packed` U8 [rows, cols/2], `.weight_scale` U8 [rows, cols/32]);
F32 for A_log (stored [head_dim], zero-padded beyond num_heads), dt_bias, the conv taps
[C,1,K], o_norm and e_score_correction_bias; BF16 for everything else. Tensors are written in
sorted-name order, which puts each expert's six tensors together in the order w1.packed,
w1.scale, w2.packed, w2.scale, w3.packed, w3.scale and each layer's experts in one run.
"""
import json
import os

import numpy as np
import torch

import st_io
from k3model import K3Config, K3Model, KDA, mxfp4_quantize

PFX = "language_model."
F32_SUFFIXES = ("A_log", "dt_bias", "conv1d.weight", "o_norm.weight", "e_score_correction_bias")


def hf_name(n):
    """Our state_dict name -> HF tensor name (without the expert tensors)."""
    if n == "lm_head.weight":
        return PFX + "lm_head.weight"
    parts = n.split(".")
    last = parts[-1]
    if last == "e_score_correction_bias":
        return PFX + "model." + ".".join(parts[:-1]) + ".gate.e_score_correction_bias"
    if last in ("A_log", "dt_bias", "weight", "bias"):
        return PFX + "model." + n
    return PFX + "model." + n + ".weight"


def _to_np(t):
    return t.detach().float().cpu().numpy()


def load_hf(model_dir, build=None, optional=()):
    """build(conf) -> an fp32 model (default: K3Model of text_config); tensors whose HF name ends
    with one of `optional` keep the model's initial value when the checkpoint lacks them."""
    with open(os.path.join(model_dir, "config.json")) as f:
        conf = json.load(f)
    model = build(conf) if build else K3Model(K3Config(conf["text_config"])).float()
    cfg = model.cfg
    raw = st_io.load_checkpoint(model_dir)

    def get(name):
        if name not in raw:
            raise KeyError(f"{model_dir}: tensor {name} missing")
        dt, shape, arr = raw[name]
        if dt == "BF16":
            return torch.from_numpy(st_io.bf16_bits_to_f32(arr).reshape(shape).copy())
        if dt == "F32":
            return torch.from_numpy(np.array(arr, dtype=np.float32).reshape(shape))
        raise ValueError(f"{name}: unexpected dtype {dt}")

    used = set()
    sd = model.state_dict()
    new = {}
    for n, t in sd.items():
        parts = n.split(".")
        if parts[-1] in ("w1", "w2", "w3"):
            mats = []
            for e in range(cfg.num_experts):
                base = PFX + "model." + ".".join(parts[:-1]) + f".experts.{e}.{parts[-1]}"
                _, _, packed = raw[base + ".weight_packed"]
                _, _, scale = raw[base + ".weight_scale"]
                used.update([base + ".weight_packed", base + ".weight_scale"])
                mats.append(st_io.mxfp4_dequant(packed, scale))
            new[n] = torch.from_numpy(np.stack(mats))
            continue
        h = hf_name(n)
        if h not in raw and h.endswith(tuple(optional)):
            new[n] = t.clone()
            continue
        v = get(h)
        used.add(h)
        if parts[-1] == "A_log":
            if v.numel() < t.numel():
                raise ValueError(f"{h}: {v.numel()} values, need at least num_heads={t.numel()}")
            v = v[: t.numel()]
        new[n] = v.reshape(t.shape)
    extra = set(raw) - used
    if extra:
        raise ValueError(f"{model_dir}: tensors not consumed: {sorted(extra)[:5]}")
    model.load_state_dict(new)
    return conf, model


def export_tensors(model):
    """{hf_name: (dtype, numpy array)} for the whole model, experts MXFP4-packed."""
    cfg = model.cfg
    out = {}
    for n, t in model.state_dict().items():
        parts = n.split(".")
        if parts[-1] in ("w1", "w2", "w3"):
            codes, e = mxfp4_quantize(t.detach().float().cpu())
            codes, e = codes.numpy(), e.numpy()
            for ex in range(cfg.num_experts):
                packed, scale = st_io.mxfp4_pack(codes[ex], e[ex])
                base = PFX + "model." + ".".join(parts[:-1]) + f".experts.{ex}.{parts[-1]}"
                out[base + ".weight_packed"] = ("U8", packed)
                out[base + ".weight_scale"] = ("U8", scale)
            continue
        h = hf_name(n)
        a = _to_np(t)
        if parts[-1] == "A_log":
            pad = np.zeros(cfg.kda_dim, dtype=np.float32)
            pad[: a.size] = a
            out[h] = ("F32", pad)
        elif h.endswith(F32_SUFFIXES):
            out[h] = ("F32", a.astype(np.float32))
        else:
            out[h] = ("BF16", st_io.f32_to_bf16_bits(a).reshape(a.shape))
    return out


def export_hf(model, config_json, out_dir, n_shards=4):
    """Writes config.json, model-0000k-of-0000n.safetensors and the index. Layers are split
    over the shards in order (embedding with the first, head and final norms with the last)."""
    os.makedirs(out_dir, exist_ok=True)
    tensors = export_tensors(model)
    L = model.cfg.num_layers

    def shard_of(name):
        if ".layers." in name:
            l = int(name.split(".layers.")[1].split(".")[0])
            return min(n_shards - 1, l * n_shards // L)
        if "embed_tokens" in name:
            return 0
        return n_shards - 1

    groups = [dict() for _ in range(n_shards)]
    for name, v in tensors.items():
        groups[shard_of(name)][name] = v
    weight_map = {}
    total = 0
    for i, g in enumerate(groups):
        fn = f"model-{i + 1:05d}-of-{n_shards:05d}.safetensors"
        total += st_io.write_safetensors(os.path.join(out_dir, fn), g)
        for name in g:
            weight_map[name] = fn
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total},
                   "weight_map": dict(sorted(weight_map.items()))}, f, indent=0)
        f.write("\n")
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config_json, f, indent=2)
        f.write("\n")
    return total
