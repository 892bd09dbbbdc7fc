"""Load a K3.1 (or K3) HF checkpoint into K31Model; write a small K3.1 test checkpoint.

Tensors and dtypes as docs/k31-spec.md §2.1: per DSA layer l (0-based),
`language_model.model.layers.{l}.self_attn.indexer.` + `wq_b.weight` [NI*DI, q_lora_rank],
`wk.weight` [DI, H], `weights_proj.weight` [NI, H] (all three BF16, else refused),
`k_norm.weight` [DI] and optional `k_norm.bias` [DI] (BF16 or F32; a missing bias is zeros).
Missing indexer tensors on a DSA layer, or any on another layer, are load errors (k3io).
"""
import json
import os
import shutil

import numpy as np

import st_io
from k3io import PFX, load_hf
from k31model import K31Config, K31Model

IDX = "self_attn.indexer."
BF16_ONLY = ("wq_b.weight", "wk.weight", "weights_proj.weight")


def _dtypes(model_dir):
    with open(os.path.join(model_dir, "model.safetensors.index.json")) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    out = {}
    for sh in shards:
        _, header = st_io.read_header(os.path.join(model_dir, sh))
        out.update({n: m["dtype"] for n, m in header.items() if n != "__metadata__"})
    return out


def load_k31(model_dir):
    """Returns (conf, model, note): note says whether the DSA path is on and the k_norm.bias case."""
    dt = _dtypes(model_dir)
    conf, model = load_hf(model_dir, build=lambda c: K31Model(K31Config(c)).float(),
                          optional=(".indexer.k_norm.bias",))
    d = model.cfg.dsa
    if d is None:
        return conf, model, "no dsa_config: dense K3"
    with_bias = 0
    for l in sorted(d.layers):
        base = f"{PFX}model.layers.{l}.{IDX}"
        for s in BF16_ONLY:
            if dt[base + s] != "BF16":
                raise ValueError(f"{model_dir}: {base + s} is {dt[base + s]}, must be BF16")
        for s in ("k_norm.weight", "k_norm.bias"):
            if dt.get(base + s, "BF16") not in ("BF16", "F32"):
                raise ValueError(f"{model_dir}: {base + s} is {dt[base + s]}, must be BF16 or F32")
        with_bias += (base + "k_norm.bias") in dt
    bias = ("with k_norm.bias" if with_bias == len(d.layers) else
            "without k_norm.bias (zeros)" if with_bias == 0 else f"k_norm.bias on {with_bias} layers")
    note = (f"DSA on layers {sorted(l + 1 for l in d.layers)} (1-based): {d.n_heads} heads x {d.head_dim}, "
            f"top-k {d.topk}, key LayerNorm eps {d.eps:g}, {bias}")
    return conf, model, note


def make_test_k31(src_dir, out_dir, topk=16, n_heads=4, head_dim=32, seed=1, bias=True,
                  arch=True, dsa_layers=True):
    """A K3.1 checkpoint from a K3 one (k3-tiny): its shards copied, plus one shard holding random
    BF16 indexer tensors for every full-attention layer, and text_config.dsa_config."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(src_dir, "config.json")) as f:
        conf = json.load(f)
    with open(os.path.join(src_dir, "model.safetensors.index.json")) as f:
        index = json.load(f)
    for sh in sorted(set(index["weight_map"].values())):
        shutil.copyfile(os.path.join(src_dir, sh), os.path.join(out_dir, sh))
    tc = conf["text_config"]
    full = tc["linear_attn_config"]["full_attn_layers"]
    dsa = {"index_n_heads": n_heads, "index_head_dim": head_dim, "index_topk": topk}
    if dsa_layers:
        dsa["dsa_layers"] = list(full)
    tc["dsa_config"] = dsa
    if arch:
        conf["architectures"] = ["KimiK31ForConditionalGeneration"]
    else:
        conf.pop("architectures", None)  # no architecture name to cross-check
    rng = np.random.RandomState(seed)
    H, Q = tc["hidden_size"], tc["q_lora_rank"]

    def bf16(*shape, scale=1.0, mean=0.0):
        return ("BF16", st_io.f32_to_bf16_bits((mean + scale * rng.randn(*shape)).astype(np.float32))
                .reshape(shape))

    tensors = {}
    for l1 in full:
        base = f"{PFX}model.layers.{l1 - 1}.{IDX}"
        tensors[base + "wq_b.weight"] = bf16(n_heads * head_dim, Q, scale=Q ** -0.5)
        tensors[base + "wk.weight"] = bf16(head_dim, H, scale=H ** -0.5)
        tensors[base + "weights_proj.weight"] = bf16(n_heads, H, scale=H ** -0.5)
        tensors[base + "k_norm.weight"] = bf16(head_dim, scale=0.1, mean=1.0)
        if bias:
            tensors[base + "k_norm.bias"] = ("F32", (0.1 * rng.randn(head_dim)).astype(np.float32))
    shard = "model-indexer.safetensors"
    st_io.write_safetensors(os.path.join(out_dir, shard), tensors)
    index["weight_map"].update({n: shard for n in tensors})
    index["weight_map"] = dict(sorted(index["weight_map"].items()))
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=0)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(conf, f, indent=2)
    return conf
