"""Kimi K3.1 Pro's sparse attention (DSA) as an independent fp32 reference, from docs/k31-spec.md.

Written from the spec text only (no sluice C++ read): see train/README.md. K3.1 = K3 (k3model.py,
unchanged) + a lightning indexer on every DSA layer (spec §3.1), a per-query top-k selection (§3.2)
and MLA's softmax restricted to the selection (§3.3).

  * `DsaConfig.parse(conf)`  — `dsa_config` as spec §1.1/§1.2 (keys, layer list, cross-checks).
  * `index_scores(qi, w, keys, ...)` — I(t,s) in fp32 in the spec's stated summation orders.
  * `select(scores, t, topk)` — the top-k with the tie rule (score desc, then earlier position).
  * `DsaMLA` — the DSA layer: `forward(x)` (whole sequence, full score matrix, additive mask) and
    `step(x_t, cache)` (one token, indexer key cache, gather over the selected positions).
  * `K31Model` — K3Model with DsaMLA on the DSA layers; with no `dsa_config` it is K3Model.
"""
import math
import sys

import numpy as np
import torch
import torch.nn as nn

from k3model import K3Config, K3Model, MLA, rms_norm

DSA_KEYS = ("index_n_heads", "index_head_dim", "index_topk", "dsa_layers")
K31_ARCH = "KimiK31ForConditionalGeneration"
K3_ARCH = "KimiK3ForConditionalGeneration"


class DsaConfig:
    """The parsed `dsa_config` (spec §1.1): n_heads, head_dim, topk, layers (0-based set), eps."""

    def __init__(self, n_heads, head_dim, topk, layers, eps):
        self.n_heads, self.head_dim, self.topk = n_heads, head_dim, topk
        self.layers = set(layers)
        self.eps = eps  # §4.2: the key LayerNorm's eps is rms_norm_eps (dsa_config declares none)

    @staticmethod
    def parse(conf):
        """conf: the whole config.json. Returns a DsaConfig, or None when the variant is off
        (§1.2: on iff dsa_config is a non-null object). Raises ValueError naming the field."""
        tc = conf.get("text_config")
        if tc is None:  # a flat config: dsa_config at the top level
            tc = conf
        elif "dsa_config" in conf:
            raise ValueError("config.json: dsa_config at the top level next to text_config "
                             "(expected text_config.dsa_config)")
        mt = conf.get("model_type")
        if mt not in ("kimi_k3", "kimi_k31"):
            raise ValueError(f"config.json: model_type {mt!r} is neither 'kimi_k3' nor 'kimi_k31'")
        d = tc.get("dsa_config")
        if d is not None and not isinstance(d, dict):
            raise ValueError("config.json: dsa_config must be an object or null")
        arch = conf.get("architectures")
        if arch is not None:
            if K31_ARCH in arch and d is None:
                raise ValueError(f"config.json: architectures names {K31_ARCH} but dsa_config is absent")
            if K3_ARCH in arch and d is not None:
                raise ValueError(f"config.json: architectures names {K3_ARCH} but dsa_config is present")
        if d is None:
            return None
        for key in d:
            if key not in DSA_KEYS:
                raise ValueError(f"config.json: dsa_config.{key}: unknown key")

        def positive(key):
            if key not in d:
                raise ValueError(f"config.json: dsa_config.{key} missing")
            v = d[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"config.json: dsa_config.{key} must be an integer >= 1, got {v!r}")
            return v

        n_heads, head_dim, topk = positive("index_n_heads"), positive("index_head_dim"), positive("index_topk")
        L = tc["num_hidden_layers"]
        full = sorted(tc["linear_attn_config"]["full_attn_layers"])
        layers = d.get("dsa_layers", full)  # absent: every full-attention layer
        if not isinstance(layers, list):
            raise ValueError("config.json: dsa_config.dsa_layers must be a list")
        for v in layers:
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= L:
                raise ValueError(f"config.json: dsa_config.dsa_layers: {v!r} is not a layer in 1..{L}")
            if v not in full:
                raise ValueError(f"config.json: dsa_config.dsa_layers: layer {v} is not a full-attention layer")
        if sorted(set(layers)) != full or len(layers) != len(full):
            raise ValueError("config.json: dsa_config.dsa_layers must equal linear_attn_config.full_attn_layers")
        return DsaConfig(n_heads, head_dim, topk, [v - 1 for v in layers], tc["rms_norm_eps"])


class K31Config(K3Config):
    def __init__(self, conf):
        super().__init__(conf.get("text_config", conf))
        self.dsa = DsaConfig.parse(conf)


# ---------------------------------------------------------------- the indexer's formula


def layer_norm(x, gamma, beta, eps):
    """§3.1 step 2: mean, biased variance, (x - mu) / sqrt(var + eps) * gamma + beta, fp32."""
    x = x.float()
    mu = x.mean(-1, keepdim=True)
    var = (x - mu).pow(2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * gamma.float() + beta.float()


def index_scores(qi, w, keys):
    """§3.1 step 7. qi [T, NI, DI], w [T, NI] (unscaled), keys [S, DI] -> I [T, S] (numpy fp32,
    every (t, s) pair; the caller applies the causal rule). d_h sums j ascending, I sums h
    ascending, both as running fp32 sums; the constant NI^-1/2 * DI^-1/2 is folded into w."""
    qi = np.asarray(qi, dtype=np.float32)
    keys = np.asarray(keys, dtype=np.float32)
    T, NI, DI = qi.shape
    c = np.float32(1.0 / math.sqrt(NI * DI))
    wc = np.asarray(w, dtype=np.float32) * c
    I = np.zeros((T, keys.shape[0]), dtype=np.float32)
    for h in range(NI):
        d = np.zeros((T, keys.shape[0]), dtype=np.float32)
        for j in range(DI):
            d = d + qi[:, h, j][:, None] * keys[:, j][None, :]
        I = I + wc[:, h][:, None] * np.maximum(d, np.float32(0))
    return I


def select(row, t, topk):
    """§3.2: the selection S(t) for absolute query position t, from row = I(t, s) for s >= 0
    (at least t + 1 entries). Candidates are s <= t; the min(topk, t+1) best by (score desc,
    position asc), NaN below every number. Returns the selected positions, ascending."""
    cand = np.asarray(row[: t + 1], dtype=np.float32)
    n = min(topk, t + 1)
    if n == t + 1:
        return np.arange(t + 1)
    nan = np.isnan(cand)
    neg = np.where(nan, np.float32(0), -cand)  # -(+0) and -(-0) compare equal in the sort
    order = np.lexsort((np.arange(t + 1), neg, nan))  # last key is the primary one
    return np.sort(order[:n])


# ---------------------------------------------------------------- the DSA layer


class Indexer(nn.Module):
    """The four/five tensors of spec §2.1 under `self_attn.indexer.`."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg.dsa
        self.wq_b = nn.Linear(cfg.q_lora, d.n_heads * d.head_dim, bias=False)
        self.wk = nn.Linear(cfg.hidden_size, d.head_dim, bias=False)
        self.weights_proj = nn.Linear(cfg.hidden_size, d.n_heads, bias=False)
        self.k_norm = nn.LayerNorm(d.head_dim)  # only its .weight/.bias are used (layer_norm above)
        with torch.no_grad():
            self.k_norm.bias.zero_()  # §2.1: zeros when the checkpoint has no bias


class DsaMLA(MLA):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.indexer = Indexer(cfg)

    def indexer_parts(self, x, cq):
        """x [T, H], cq [T, q_lora] (normed q latent) -> qi [T, NI, DI], key [T, DI] (post-norm), w [T, NI]."""
        d = self.cfg.dsa
        ix = self.indexer
        qi = (cq.float() @ ix.wq_b.weight.float().t()).view(-1, d.n_heads, d.head_dim)
        kt = x.float() @ ix.wk.weight.float().t()
        key = layer_norm(kt, ix.k_norm.weight, ix.k_norm.bias, d.eps)
        w = x.float() @ ix.weights_proj.weight.float().t()
        return qi, key, w

    def latents(self, x):
        """The MLA projections of k3model.MLA: q [T, nh, dn+dr], cq, c [T, kv_lora], kpe [T, dr]."""
        cfg = self.cfg
        cq = rms_norm(self.q_a_proj(x), self.q_a_layernorm, cfg.eps)
        q = self.q_b_proj(cq).view(x.shape[0], cfg.mla_heads, cfg.nope + cfg.rope)
        ckv = self.kv_a_proj_with_mqa(x)
        c = rms_norm(ckv[..., : cfg.kv_lora], self.kv_a_layernorm, cfg.eps)
        return q, cq, c, ckv[..., cfg.kv_lora:].float()

    def selection_mask(self, x, cq):
        """[T, T] bool: row t is True exactly on S(t) (whole sequence from position 0)."""
        qi, key, w = self.indexer_parts(x, cq)
        I = index_scores(qi.numpy(), w.numpy(), key.numpy())
        if np.isnan(I).any():  # §3.2: ranked last, but a bug to report
            print(f"k31model: {int(np.isnan(I).sum())} NaN indexer scores", file=sys.stderr)
        T = x.shape[0]
        m = np.zeros((T, T), dtype=bool)
        for t in range(T):
            m[t, select(I[t], t, self.cfg.dsa.topk)] = True
        self.last_scores, self.last_mask = I, m
        return torch.from_numpy(m)

    def forward(self, x):
        """x [B, T, H] (whole sequences) -> [B, T, H]. k3model.MLA's fp32 path op for op, with
        the causal mask replaced by "not in S(t)" (so that S(t) = C(t) gives the dense bits)."""
        cfg = self.cfg
        B, T, _ = x.shape
        nh, dn, dr, dv = cfg.mla_heads, cfg.nope, cfg.rope, cfg.v_head
        cq = rms_norm(self.q_a_proj(x), self.q_a_layernorm, cfg.eps)
        q = self.q_b_proj(cq).view(B, T, nh, dn + dr)
        ckv = self.kv_a_proj_with_mqa(x)
        c = rms_norm(ckv[..., : cfg.kv_lora], self.kv_a_layernorm, cfg.eps)
        kpe = ckv[..., cfg.kv_lora :]
        kv = self.kv_b_proj(c).view(B, T, nh, dn + dv)
        k = torch.cat([kv[..., :dn], kpe.unsqueeze(2).expand(B, T, nh, dr).to(kv.dtype)], -1)
        vv = kv[..., dn:]
        q, k, vv = (t.transpose(1, 2) for t in (q, k, vv))  # [B, nh, T, .]
        scale = 1.0 / math.sqrt(dn + dr)
        s = (q.float() @ k.float().transpose(-1, -2)) * scale
        sel = torch.stack([self.selection_mask(x[b], cq[b]) for b in range(B)])  # [B, T, T]
        s = s.masked_fill(~sel.unsqueeze(1), float("-inf"))
        a = torch.softmax(s, -1) @ vv.float()
        a = a.transpose(1, 2).reshape(B, T, nh * dv)
        gate = torch.sigmoid(self.g_proj(x).float())
        y = a.float() * gate
        return self.o_proj(y)

    def step(self, x_t, cache):
        """One token. x_t [H]; cache: dict of lists 'c', 'kpe', 'key' (the MLA latent cache and
        the indexer key cache, one row per past position), appended here. Returns [H]."""
        cfg = self.cfg
        nh, dn, dr, dv = cfg.mla_heads, cfg.nope, cfg.rope, cfg.v_head
        x1 = x_t.view(1, -1)
        q, cq, c, kpe = self.latents(x1)
        qi, key, w = self.indexer_parts(x1, cq)
        cache["c"].append(c[0])
        cache["kpe"].append(kpe[0])
        cache["key"].append(key[0])  # §3.1 step 6: append before scoring (t scores itself)
        t = len(cache["key"]) - 1
        keys = torch.stack(cache["key"]).numpy()
        row = index_scores(qi.numpy(), w.numpy(), keys)[0]
        S = torch.from_numpy(select(row, t, cfg.dsa.topk))
        self.last_step_sel = S
        C = torch.stack(cache["c"])[S]  # gather the selected latents
        KP = torch.stack(cache["kpe"])[S]
        kv = self.kv_b_proj(C).view(len(S), nh, dn + dv)
        k = torch.cat([kv[..., :dn], KP.unsqueeze(1).expand(len(S), nh, dr)], -1)  # [n, nh, dn+dr]
        s = torch.einsum("hd,nhd->hn", q[0].float(), k.float()) / math.sqrt(dn + dr)
        p = torch.softmax(s, -1)
        a = torch.einsum("hn,nhd->hd", p, kv[..., dn:].float()).reshape(nh * dv)
        return self.o_proj(a * torch.sigmoid(self.g_proj(x_t).float()))


def new_cache():
    return {"c": [], "kpe": [], "key": []}


class K31Model(K3Model):
    """K3Model whose DSA layers carry an indexer. Without dsa_config: exactly K3Model."""

    def __init__(self, cfg):
        super().__init__(cfg)
        if cfg.dsa is not None:
            for ly in self.layers:
                if ly.l in cfg.dsa.layers:
                    ly.self_attn = DsaMLA(cfg)

    def dsa_layers(self):
        return [ly.self_attn for ly in self.layers if isinstance(ly.self_attn, DsaMLA)]
