"""A Kimi K3 text model in PyTorch, written from docs/k3-spec.md (§3).

One implementation serves three uses:
  * training on the GPU (bf16 autocast for the projections; the KDA recurrence, AttnRes,
    the router and all norms in fp32), with MXFP4 quantization-aware training of the
    routed experts (straight-through estimator);
  * the fixture check on the CPU (fp32 everywhere, weights loaded from a K3 checkpoint);
  * reference numbers for sluice (fp32 forward on the exported, dequantized weights).

Works with torch 1.13 (Debian, CPU) and torch 2.x.

Numerics contract (what the k3-tiny fixture and sluice follow):
  * every RMSNorm, AttnRes RMS, the MLA latent norms and the KDA gated output norm use
    eps = rms_norm_eps (1e-5);
  * KDA q/k L2 norm is x / max(||x||, 1e-5); q is then scaled by head_dim^-1/2;
  * KDA gate g = lower_bound * sigmoid(exp(A_log[h]) * (f + dt_bias)), A_log per head
    (the first num_heads entries of the stored [head_dim] vector);
  * router: sigmoid scores, top-k on score + e_score_correction_bias, weights = the
    unbiased scores of the chosen experts renormalized, times routed_scaling_factor;
  * AttnRes as spec §3.1/§3.2 (seal banks the raw partial sum when l % block == 0).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------- config


class K3Config:
    def __init__(self, tc):
        self.raw = tc
        self.vocab_size = tc["vocab_size"]
        self.hidden_size = tc["hidden_size"]
        self.num_layers = tc["num_hidden_layers"]
        self.mla_heads = tc["num_attention_heads"]
        self.intermediate_size = tc["intermediate_size"]
        self.moe_intermediate_size = tc["moe_intermediate_size"]
        self.latent = tc["routed_expert_hidden_size"]
        self.num_experts = tc["num_experts"]
        self.top_k = tc["num_experts_per_token"]
        self.num_shared = tc["num_shared_experts"]
        self.first_dense = tc["first_k_dense_replace"]
        self.routed_scale = tc["routed_scaling_factor"]
        self.renormalize = tc["moe_renormalize"]
        self.situ_beta = tc["activation_situ_beta"]
        self.situ_lin_beta = tc["activation_situ_linear_beta"]
        self.eps = tc["rms_norm_eps"]
        self.q_lora = tc["q_lora_rank"]
        self.kv_lora = tc["kv_lora_rank"]
        self.nope = tc["qk_nope_head_dim"]
        self.rope = tc["qk_rope_head_dim"]
        self.v_head = tc["v_head_dim"]
        self.block = tc["attn_res_block_size"]
        la = tc["linear_attn_config"]
        self.kda_heads = la["num_heads"]
        self.kda_dim = la["head_dim"]
        self.conv_k = la["short_conv_kernel_size"]
        self.gate_lb = la["gate_lower_bound"]
        mla = set(la["full_attn_layers"])
        kda = set(la["kda_layers"])
        if mla & kda or (mla | kda) != set(range(1, self.num_layers + 1)):
            raise ValueError("kda_layers and full_attn_layers must partition 1..num_hidden_layers")
        self.is_mla = [(l + 1) in mla for l in range(self.num_layers)]


# ---------------------------------------------------------------- primitives


def _amp():
    """True inside a CUDA or CPU autocast region: the training path (bf16 projections,
    padded batched experts, memory-saving SiTU)."""
    if torch.is_autocast_enabled():
        return True
    try:
        return torch.is_autocast_enabled("cpu")
    except TypeError:  # torch < 2.4
        return torch.is_autocast_cpu_enabled()


def no_amp(x):
    """A region where autocast is off: the KDA recurrence, router and AttnRes stay fp32."""
    return torch.autocast(device_type=x.device.type, enabled=False)


def rms_norm(x, w, eps):
    x = x.float()
    n = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return n * w.float()


def situ(g, u, beta, lin_beta):
    g = g.float()
    u = u.float()
    a = (beta * torch.tanh(g / beta)) * torch.sigmoid(g)
    b = lin_beta * torch.tanh(u / lin_beta)
    return a * b


class _SituFn(torch.autograd.Function):
    """SiTU-GLU that saves only its inputs (the big expert activations) for backward."""

    @staticmethod
    def forward(ctx, g, u, beta, lin_beta):
        ctx.save_for_backward(g, u)
        ctx.beta, ctx.lin_beta = beta, lin_beta
        return situ(g, u, beta, lin_beta).to(g.dtype)

    @staticmethod
    def backward(ctx, grad):
        g, u = ctx.saved_tensors
        beta, lb = ctx.beta, ctx.lin_beta
        gf, uf, gr = g.float(), u.float(), grad.float()
        th = torch.tanh(gf / beta)
        sg = torch.sigmoid(gf)
        a = beta * th * sg
        tu = torch.tanh(uf / lb)
        b = lb * tu
        da = (1 - th * th) * sg + beta * th * sg * (1 - sg)
        db = 1 - tu * tu
        return (gr * b * da).to(g.dtype), (gr * a * db).to(u.dtype), None, None


def situ_train(g, u, beta, lin_beta):
    return _SituFn.apply(g, u, beta, lin_beta)


class _SituWeightedFn(torch.autograd.Function):
    """h [N, E, 2I] (gate | up per expert), w [N, E] -> SiTU(gate, up) * w, saving only h, w."""

    @staticmethod
    def forward(ctx, h, w, beta, lin_beta):
        ctx.save_for_backward(h, w)
        ctx.beta, ctx.lin_beta = beta, lin_beta
        I = h.shape[-1] // 2
        return (situ(h[..., :I], h[..., I:], beta, lin_beta) * w.float().unsqueeze(-1)).to(h.dtype)

    @staticmethod
    def backward(ctx, grad):
        h, w = ctx.saved_tensors
        beta, lb = ctx.beta, ctx.lin_beta
        I = h.shape[-1] // 2
        gf, uf = h[..., :I].float(), h[..., I:].float()
        gr = grad.float()
        th = torch.tanh(gf / beta)
        sg = torch.sigmoid(gf)
        a = beta * th * sg
        tu = torch.tanh(uf / lb)
        b = lb * tu
        dw = (gr * a * b).sum(-1)
        gw = gr * w.float().unsqueeze(-1)
        dg = gw * b * ((1 - th * th) * sg + beta * th * sg * (1 - sg))
        du = gw * a * (1 - tu * tu)
        return torch.cat([dg, du], -1).to(h.dtype), dw.to(w.dtype), None, None


def situ_weighted(h, w, beta, lin_beta):
    return _SituWeightedFn.apply(h, w, beta, lin_beta)


def l2_norm(x, eps):
    return x / x.norm(dim=-1, keepdim=True).clamp_min(eps)


# ---------------------------------------------------------------- MXFP4 fake quantization

_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
_E2M1_MID = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def mxfp4_quantize(w):
    """w [..., R, C] float -> (codes uint8 [..., R, C], exponents int32 [..., R, C/32]).

    Per group of 32 input columns: exponent e = ceil(log2(amax / 6)) (so nothing clips),
    codes = nearest E2M1 magnitude of |w| / 2^e (ties to the larger magnitude), sign bit 8.
    Zero groups get e = -126. Deterministic; the exporter and QAT both use it."""
    w = w.float()
    shp = w.shape
    g = w.reshape(*shp[:-1], shp[-1] // 32, 32)
    amax = g.abs().amax(-1)
    m, p = torch.frexp(amax / 6.0)
    e = p - (m == 0.5).to(p.dtype)
    e = torch.where(amax > 0, e, torch.full_like(e, -126)).clamp(-126, 127)
    scale = torch.pow(2.0, e.float())
    x = g.abs() / scale.unsqueeze(-1)
    mids = torch.tensor(_E2M1_MID, device=w.device, dtype=torch.float32)
    mag = torch.bucketize(x, mids, right=True)  # ties go up
    codes = mag.to(torch.uint8) | ((g < 0) & (mag > 0)).to(torch.uint8) * 8
    return codes.reshape(shp), e.to(torch.int32)


def mxfp4_dequant_t(codes, e):
    vals = torch.tensor(_E2M1, device=codes.device, dtype=torch.float32)
    c = codes.long()
    mag = vals[c & 7]
    v = torch.where((c & 8) > 0, -mag, mag)
    shp = v.shape
    v = v.reshape(*shp[:-1], shp[-1] // 32, 32) * torch.pow(2.0, e.float()).unsqueeze(-1)
    return v.reshape(shp)


def mxfp4_fake_quant(w):
    with torch.no_grad():
        q = mxfp4_dequant_t(*mxfp4_quantize(w))
    return w + (q - w).detach()


# ---------------------------------------------------------------- KDA


def kda_recurrent(q, k, v, g, beta, state=None):
    """Plain per-token recurrence (spec §3.3 step 7). q,k,g [B,T,H,D], v [B,T,H,Dv], beta [B,T,H].
    Returns o [B,T,H,Dv] and the final state [B,H,D,Dv]. fp32."""
    B, T, H, D = k.shape
    Dv = v.shape[-1]
    S = torch.zeros(B, H, D, Dv, dtype=torch.float32, device=k.device) if state is None else state
    outs = []
    for t in range(T):
        S = S * torch.exp(g[:, t]).unsqueeze(-1)
        kt = k[:, t]
        e = v[:, t] - torch.einsum("bhi,bhij->bhj", kt, S)
        S = S + beta[:, t, :, None, None] * kt.unsqueeze(-1) * e.unsqueeze(-2)
        outs.append(torch.einsum("bhi,bhij->bhj", q[:, t], S))
    return torch.stack(outs, 1), S


def kda_chunked(q, k, v, g, beta, chunk=32):
    """Chunked (WY / UT) form of the same recurrence, fp32, exact up to rounding.

    Inside a chunk the pairwise decays exp(G_t - G_s) are formed as the product of two
    factors taken relative to the chunk's middle position, which stay within e^±(5*chunk/2)
    (finite in fp32 for chunk <= 32 with the -5 lower bound). Products above the diagonal
    may overflow; they are discarded with torch.where, never multiplied by a zero mask."""
    B, T, H, D = k.shape
    Dv = v.shape[-1]
    C = chunk
    pad = (-T) % C
    if pad:
        q = F.pad(q, (0, 0, 0, 0, 0, pad))
        k = F.pad(k, (0, 0, 0, 0, 0, pad))
        v = F.pad(v, (0, 0, 0, 0, 0, pad))
        g = F.pad(g, (0, 0, 0, 0, 0, pad))
        beta = F.pad(beta, (0, 0, 0, pad))
    Tp = T + pad
    N = Tp // C
    # [B, H, N, C, D]
    q, k, v, g = (x.reshape(B, N, C, H, x.shape[-1]).permute(0, 3, 1, 2, 4).float() for x in (q, k, v, g))
    beta = beta.reshape(B, N, C, H).permute(0, 3, 1, 2).float()
    G = g.cumsum(-2)
    ref = G[..., C // 2 : C // 2 + 1, :]
    up = torch.exp(G - ref)
    down = torch.exp(ref - G)
    kp, kn, qp = k * up, k * down, q * up
    idx = torch.arange(C, device=k.device)
    strict = idx[:, None] > idx[None, :]
    incl = idx[:, None] >= idx[None, :]
    zero = torch.zeros((), device=k.device)
    A = torch.where(strict, kp @ kn.transpose(-1, -2), zero) * beta.unsqueeze(-1)
    Qk = torch.where(incl, qp @ kn.transpose(-1, -2), zero)
    eG = torch.exp(G)
    rhs = torch.cat([v * beta.unsqueeze(-1), k * eG * beta.unsqueeze(-1)], -1)
    eye = torch.eye(C, device=k.device, dtype=torch.float32)
    X = torch.linalg.solve_triangular(eye + A, rhs, upper=False, unitriangular=True)
    U, Wk = X[..., :Dv], X[..., Dv:]
    qg = q * eG
    Glast = G[..., C - 1 : C, :]
    kd = k * torch.exp(Glast - G)
    decay_last = torch.exp(Glast[..., 0, :])  # [B,H,N,D]
    S = torch.zeros(B, H, D, Dv, dtype=torch.float32, device=k.device)
    outs = []
    for n in range(N):
        W = U[:, :, n] - Wk[:, :, n] @ S
        outs.append(qg[:, :, n] @ S + Qk[:, :, n] @ W)
        S = decay_last[:, :, n].unsqueeze(-1) * S + kd[:, :, n].transpose(-1, -2) @ W
    o = torch.stack(outs, 2)  # [B,H,N,C,Dv]
    o = o.permute(0, 2, 3, 1, 4).reshape(B, Tp, H, Dv)
    return o[:, :T]


class KDA(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        Hd, nh, d = cfg.hidden_size, cfg.kda_heads, cfg.kda_dim
        C = nh * d
        self.cfg = cfg
        self.q_proj = nn.Linear(Hd, C, bias=False)
        self.k_proj = nn.Linear(Hd, C, bias=False)
        self.v_proj = nn.Linear(Hd, C, bias=False)
        self.g_proj = nn.Linear(Hd, C, bias=False)
        self.o_proj = nn.Linear(C, Hd, bias=False)
        self.f_a_proj = nn.Linear(Hd, d, bias=False)
        self.f_b_proj = nn.Linear(d, C, bias=False)
        self.b_proj = nn.Linear(Hd, nh, bias=False)
        K = cfg.conv_k
        self.q_conv1d = nn.Parameter(torch.empty(C, 1, K))
        self.k_conv1d = nn.Parameter(torch.empty(C, 1, K))
        self.v_conv1d = nn.Parameter(torch.empty(C, 1, K))
        self.A_log = nn.Parameter(torch.empty(nh))  # exported zero-padded to [head_dim]
        self.dt_bias = nn.Parameter(torch.empty(C))
        self.o_norm = nn.Parameter(torch.ones(d))

    def conv(self, x, w):
        # x [B,T,C] -> causal depthwise conv, tap K-1 on the current token, then SiLU
        T = x.shape[1]
        y = F.conv1d(x.float().transpose(1, 2), w.float(), padding=w.shape[-1] - 1, groups=w.shape[0])
        return F.silu(y[..., :T].transpose(1, 2))

    def forward(self, x, chunk=32, recurrent=False):
        cfg = self.cfg
        B, T, _ = x.shape
        nh, d = cfg.kda_heads, cfg.kda_dim
        q = self.conv(self.q_proj(x), self.q_conv1d).view(B, T, nh, d)
        k = self.conv(self.k_proj(x), self.k_conv1d).view(B, T, nh, d)
        v = self.conv(self.v_proj(x), self.v_conv1d).view(B, T, nh, d)
        q = l2_norm(q, cfg.eps) * (d ** -0.5)
        k = l2_norm(k, cfg.eps)
        f = self.f_b_proj(self.f_a_proj(x)).float().view(B, T, nh, d)
        a = torch.exp(self.A_log.float()).view(1, 1, nh, 1)
        g = cfg.gate_lb * torch.sigmoid(a * (f + self.dt_bias.float().view(nh, d)))
        beta = torch.sigmoid(self.b_proj(x).float())
        with no_amp(x):
            if recurrent:
                o, _ = kda_recurrent(q.float(), k.float(), v.float(), g, beta)
            else:
                o = _COMPILED.get("kda", kda_chunked)(q.float(), k.float(), v.float(), g, beta, chunk)
        z = self.g_proj(x).float().view(B, T, nh, d)
        y = rms_norm(o, self.o_norm, cfg.eps) * torch.sigmoid(z)
        return self.o_proj(y.reshape(B, T, nh * d))


# ---------------------------------------------------------------- MLA


class MLA(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        Hd, nh = cfg.hidden_size, cfg.mla_heads
        self.cfg = cfg
        self.q_a_proj = nn.Linear(Hd, cfg.q_lora, bias=False)
        self.q_a_layernorm = nn.Parameter(torch.ones(cfg.q_lora))
        self.q_b_proj = nn.Linear(cfg.q_lora, nh * (cfg.nope + cfg.rope), bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(Hd, cfg.kv_lora + cfg.rope, bias=False)
        self.kv_a_layernorm = nn.Parameter(torch.ones(cfg.kv_lora))
        self.kv_b_proj = nn.Linear(cfg.kv_lora, nh * (cfg.nope + cfg.v_head), bias=False)
        self.g_proj = nn.Linear(Hd, nh * cfg.v_head, bias=False)
        self.o_proj = nn.Linear(nh * cfg.v_head, Hd, bias=False)

    def forward(self, x):
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
        if hasattr(F, "scaled_dot_product_attention") and _amp():
            a = F.scaled_dot_product_attention(q, k.to(q.dtype), vv.to(q.dtype), is_causal=True, scale=scale)
        else:
            s = (q.float() @ k.float().transpose(-1, -2)) * scale
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            s = s.masked_fill(mask, float("-inf"))
            a = torch.softmax(s, -1) @ vv.float()
        a = a.transpose(1, 2).reshape(B, T, nh * dv)
        gate = torch.sigmoid(self.g_proj(x).float())
        y = a.float() * gate
        return self.o_proj(y)


# ---------------------------------------------------------------- FFN / MoE


class DenseMLP(nn.Module):
    def __init__(self, cfg, width):
        super().__init__()
        self.cfg = cfg
        self.gate_proj = nn.Linear(cfg.hidden_size, width, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, width, bias=False)
        self.down_proj = nn.Linear(width, cfg.hidden_size, bias=False)

    def forward(self, y):
        cfg = self.cfg
        if _amp():
            h = situ_train(self.gate_proj(y), self.up_proj(y), cfg.situ_beta, cfg.situ_lin_beta)
        else:
            h = situ(self.gate_proj(y), self.up_proj(y), cfg.situ_beta, cfg.situ_lin_beta)
        return self.down_proj(h)


class LatentMoE(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        E, Hd, L, I = cfg.num_experts, cfg.hidden_size, cfg.latent, cfg.moe_intermediate_size
        self.gate = nn.Linear(Hd, E, bias=False)
        self.register_buffer("e_score_correction_bias", torch.zeros(E))
        self.routed_expert_down_proj = nn.Linear(Hd, L, bias=False)
        self.routed_expert_norm = nn.Parameter(torch.ones(L))
        self.routed_expert_up_proj = nn.Linear(L, Hd, bias=False)
        self.w1 = nn.Parameter(torch.empty(E, I, L))  # gate
        self.w2 = nn.Parameter(torch.empty(E, L, I))  # down
        self.w3 = nn.Parameter(torch.empty(E, I, L))  # up
        self.shared_experts = DenseMLP(cfg, cfg.num_shared * I)
        self.qat = False
        self.capacity_factor = 1.5
        self.last_counts = None

    def route(self, y):
        cfg = self.cfg
        with no_amp(y):
            logits = y.float() @ self.gate.weight.float().t()
        s = torch.sigmoid(logits)
        sel = s + self.e_score_correction_bias.float()
        _, idx = torch.topk(sel, cfg.top_k, dim=-1, sorted=True)
        w = s.gather(-1, idx)
        if cfg.renormalize:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        return idx, w * cfg.routed_scale

    def expert_weights(self):
        if self.qat:
            return mxfp4_fake_quant(self.w1), mxfp4_fake_quant(self.w2), mxfp4_fake_quant(self.w3)
        return self.w1, self.w2, self.w3

    def forward(self, y):
        cfg = self.cfg
        shp = y.shape
        y2 = y.reshape(-1, shp[-1])
        Ntok = y2.shape[0]
        idx, w = self.route(y2)
        lat = self.routed_expert_down_proj(y2)
        w1, w2, w3 = self.expert_weights()
        E, k = cfg.num_experts, cfg.top_k
        flat_e = idx.reshape(-1)
        if _amp():
            # training path: token copies sorted by expert into a fixed-capacity buffer
            # [E, cap, latent] (cap = capacity_factor x the mean load), batched matmuls, no host
            # syncs. Copies beyond an expert's capacity are dropped (training only; rare once
            # the selection bias has balanced the load). bf16 matmuls.
            dt = TRAIN_DTYPE
            nk = flat_e.numel()
            cap = int(math.ceil(nk / E * self.capacity_factor))
            counts = torch.zeros(E, device=y.device).scatter_add_(
                0, flat_e, torch.ones(nk, device=y.device))
            self.last_counts = counts
            order = torch.argsort(flat_e, stable=True)
            se = flat_e[order]
            starts = (torch.cumsum(counts, 0) - counts).long()
            pos = torch.arange(nk, device=y.device) - starts[se]
            keep = pos < cap
            self.last_dropped = (~keep).sum()
            pos = torch.where(keep, pos, torch.full_like(pos, cap))  # slot `cap` collects the dropped
            tok = order // k
            buf = torch.zeros(E, cap + 1, cfg.latent, device=y.device, dtype=dt)
            buf = buf.index_put((se, pos), lat[tok].to(dt))
            hg = torch.bmm(buf, w1.to(dt).transpose(1, 2))
            hu = torch.bmm(buf, w3.to(dt).transpose(1, 2))
            o = torch.bmm(situ_train(hg, hu, cfg.situ_beta, cfg.situ_lin_beta), w2.to(dt).transpose(1, 2))
            wk = (w.reshape(-1)[order] * keep).unsqueeze(-1)
            r = torch.zeros(Ntok, cfg.latent, device=y.device, dtype=torch.float32)
            r = r.index_add(0, tok, o[se, pos].float() * wk)
        else:
            # exact fp32 path, one expert at a time, combine in top-k order
            lat = lat.float()
            r = torch.zeros(Ntok, cfg.latent, dtype=torch.float32, device=y.device)
            self.last_counts = torch.bincount(flat_e, minlength=E).float()
            for e in range(E):
                rows, slot = (idx == e).nonzero(as_tuple=True)
                if rows.numel() == 0:
                    continue
                xe = lat[rows]
                h = situ(xe @ w1[e].float().t(), xe @ w3[e].float().t(), cfg.situ_beta, cfg.situ_lin_beta)
                r.index_add_(0, rows, (h @ w2[e].float().t()) * w[rows, slot].unsqueeze(-1))
        rn = rms_norm(r, self.routed_expert_norm, cfg.eps)
        R = self.routed_expert_up_proj(rn)
        out = R.float() + self.shared_experts(y2).float()
        self.last_idx = idx
        return out.reshape(*shp[:-1], -1)


# ---------------------------------------------------------------- AttnRes and the model


def attn_res_plain(sources, u, eps):
    V = torch.stack([s.float() for s in sources], 0)
    kk = V * torch.rsqrt(V.pow(2).mean(-1, keepdim=True) + eps)
    s = (kk * u.float()).sum(-1)
    p = torch.softmax(s, 0)
    return (p.unsqueeze(-1) * V).sum(0)


class _AttnResFn(torch.autograd.Function):
    """AttnRes that keeps only the sources and the small [S, ...] score tensors for backward."""

    @staticmethod
    def forward(ctx, u, eps, *sources):
        V = torch.stack([x.float() for x in sources], 0)
        r = torch.rsqrt(V.pow(2).mean(-1) + eps)
        s = (V * u.float()).sum(-1) * r
        p = torch.softmax(s, 0)
        ctx.save_for_backward(u, r, s, p, *sources)
        return (p.unsqueeze(-1) * V).sum(0)

    @staticmethod
    def backward(ctx, gout):
        u, r, s, p, *sources = ctx.saved_tensors
        V = torch.stack([x.float() for x in sources], 0)
        n = V.shape[-1]
        dp = (V * gout.unsqueeze(0)).sum(-1)
        ds = p * (dp - (p * dp).sum(0, keepdim=True))
        dV = p.unsqueeze(-1) * gout.unsqueeze(0) + ds.unsqueeze(-1) * (
            r.unsqueeze(-1) * u.float() - (s * r * r / n).unsqueeze(-1) * V)
        du = ((ds * r).unsqueeze(-1) * V).reshape(-1, n).sum(0)
        return (du.to(u.dtype), None) + tuple(d.to(x.dtype) for d, x in zip(dV.unbind(0), sources))


TRAIN_DTYPE = torch.bfloat16  # expert matmul dtype on the training path (tests set float32)

# set by enable_compile(): compiled versions of the hot pure functions
_COMPILED = {}


def attn_res(sources, u, eps):
    if "attn_res" in _COMPILED and torch.is_grad_enabled():
        return _COMPILED["attn_res"](sources, u, eps)
    if torch.is_grad_enabled() and (u.requires_grad or any(x.requires_grad for x in sources)):
        return _AttnResFn.apply(u, eps, *sources)
    return attn_res_plain(sources, u, eps)


def enable_compile():
    _COMPILED["attn_res"] = torch.compile(attn_res_plain, dynamic=False)
    _COMPILED["kda"] = torch.compile(kda_chunked, dynamic=False)


def disable_compile():
    _COMPILED.clear()


class Layer(nn.Module):
    def __init__(self, cfg, l):
        super().__init__()
        Hd = cfg.hidden_size
        self.l = l
        self.input_layernorm = nn.Parameter(torch.ones(Hd))
        self.post_attention_layernorm = nn.Parameter(torch.ones(Hd))
        self.self_attention_res_norm = nn.Parameter(torch.ones(Hd))
        self.self_attention_res_proj = nn.Parameter(torch.zeros(1, Hd))
        self.mlp_res_norm = nn.Parameter(torch.ones(Hd))
        self.mlp_res_proj = nn.Parameter(torch.zeros(1, Hd))
        self.self_attn = MLA(cfg) if cfg.is_mla[l] else KDA(cfg)
        if l < cfg.first_dense:
            self.mlp = DenseMLP(cfg, cfg.intermediate_size)
        else:
            self.block_sparse_moe = LatentMoE(cfg)

    def ffn(self, y):
        return self.mlp(y) if hasattr(self, "mlp") else self.block_sparse_moe(y)


class K3Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        Hd = cfg.hidden_size
        self.embed_tokens = nn.Embedding(cfg.vocab_size, Hd)
        self.layers = nn.ModuleList([Layer(cfg, l) for l in range(cfg.num_layers)])
        self.norm = nn.Parameter(torch.ones(Hd))
        self.output_attn_res_norm = nn.Parameter(torch.ones(Hd))
        self.output_attn_res_proj = nn.Parameter(torch.zeros(1, Hd))
        self.lm_head = nn.Linear(Hd, cfg.vocab_size, bias=False)

    def moe_layers(self):
        return [ly.block_sparse_moe for ly in self.layers if hasattr(ly, "block_sparse_moe")]

    def set_qat(self, on):
        for m in self.moe_layers():
            m.qat = on

    def hidden(self, ids, collect=None, kda_recurrent=False):
        cfg = self.cfg
        eps = cfg.eps
        P = self.embed_tokens(ids).float()
        banks = []
        for ly in self.layers:
            l = ly.l
            u_attn = ly.self_attention_res_norm.float() * ly.self_attention_res_proj[0].float()
            a_in = P if not banks else attn_res(banks + [P], u_attn, eps)
            if l % cfg.block == 0:
                banks.append(P)
                P_prev = None
            else:
                P_prev = P
            x = rms_norm(a_in, ly.input_layernorm, eps)
            if isinstance(ly.self_attn, KDA):
                o = ly.self_attn(x, recurrent=kda_recurrent).float()
            else:
                o = ly.self_attn(x).float()
            P = o if P_prev is None else P_prev + o
            u_mlp = ly.mlp_res_norm.float() * ly.mlp_res_proj[0].float()
            m_in = attn_res(banks + [P], u_mlp, eps)
            y = rms_norm(m_in, ly.post_attention_layernorm, eps)
            P = P + ly.ffn(y).float()
            if collect is not None:
                collect.append(P)
        u_out = self.output_attn_res_norm.float() * self.output_attn_res_proj[0].float()
        z = attn_res(banks + [P], u_out, eps)
        return rms_norm(z, self.norm, eps)

    def forward(self, ids, collect=None, kda_recurrent=False):
        return self.lm_head(self.hidden(ids, collect, kda_recurrent))


# ---------------------------------------------------------------- init for training


def init_weights(model, seed):
    cfg = model.cfg
    gen = torch.Generator().manual_seed(seed)
    std = 0.02
    out_std = 0.02 / math.sqrt(2 * cfg.num_layers)

    def normal_(p, s):
        with torch.no_grad():
            p.copy_(torch.randn(p.shape, generator=gen) * s)

    normal_(model.embed_tokens.weight, 1.0)
    normal_(model.lm_head.weight, 1.0 / math.sqrt(cfg.hidden_size))
    for ly in model.layers:
        at = ly.self_attn
        for name, p in at.named_parameters():
            if name.endswith("weight") and p.dim() == 2:
                normal_(p, out_std if name.startswith("o_proj") else std)
        if isinstance(at, KDA):
            with torch.no_grad():
                K = cfg.conv_k
                for w in (at.q_conv1d, at.k_conv1d, at.v_conv1d):
                    w.copy_((torch.rand(w.shape, generator=gen) * 2 - 1) / math.sqrt(K))
                at.A_log.copy_(torch.log(1 + 15 * torch.rand(at.A_log.shape, generator=gen)))
                at.dt_bias.copy_(-2.0 * torch.rand(at.dt_bias.shape, generator=gen))
        ffn = ly.mlp if hasattr(ly, "mlp") else ly.block_sparse_moe
        for name, p in ffn.named_parameters():
            if p.dim() == 2:
                normal_(p, out_std if "down_proj" in name and "routed" not in name else std)
        if hasattr(ly, "block_sparse_moe"):
            m = ly.block_sparse_moe
            normal_(m.w1, 1.0 / math.sqrt(cfg.latent))
            normal_(m.w3, 1.0 / math.sqrt(cfg.latent))
            normal_(m.w2, out_std)
            normal_(m.routed_expert_up_proj.weight, out_std)
