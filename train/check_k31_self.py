#!/usr/bin/python3
"""Self-checks of the K3.1 DSA reference (train/k31model.py), no engine needed.

Usage: /usr/bin/python3 train/check_k31_self.py [K3_TINY_MODEL_DIR]   (default tests/fixtures/k3-tiny/model)

  hand      a tiny case (2 heads x 2 dims, 5 positions, ties, -0.0, negative w, NaN) worked out by
            hand (the numbers are in the comments) against index_scores() and select();
  config    dsa_config parsing and its refusals (spec §1.1/§1.2);
  tie-rule  select() against a second formulation (Python's sorted with the key of §3.2) on the
            real scores of a 200-token prompt;
  dense     (a) top-k >= context: every DSA layer and the logits are bit-identical to dense K3 MLA
            on the same weights; with top-k 16 they are not (the selection is active);
  step      (b) each DSA layer, prefill (whole sequence, score matrix + mask) vs token by token
            (indexer key cache + gather): same selections, outputs within 1e-5 relative;
  loader    k_norm.bias absent -> zeros; a stray indexer tensor or non-BF16 wk is refused.
Exits 1 on any failure.
"""
import json
import math
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402
from k3io import load_hf  # noqa: E402
from k31io import load_k31, make_test_k31  # noqa: E402
from k31model import MLA, DsaConfig, index_scores, layer_norm, new_cache, select  # noqa: E402

FAILS = []


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")
    if not ok:
        FAILS.append(name)


def hand_case():
    # keys k_s (already normed): k0=(1,0) k1=(0,1) k2=(-1,0) k3=(1,1) k4=(0,-1)
    keys = np.array([[1, 0], [0, 1], [-1, 0], [1, 1], [0, -1]], dtype=np.float32)
    # every query: head 0 q=(2,0), head 1 q=(0,1); c = 2^-1/2 * 2^-1/2 = 1/2
    qi = np.array([[[2, 0], [0, 1]]] * 5, dtype=np.float32)
    # w=(1,2): w'=(0.5,1). d0 = 2*k[0] = 2,0,-2,2,0 -> relu 2,0,0,2,0; d1 = k[1] = 0,1,0,1,-1 -> 0,1,0,1,0
    # I = 0.5*relu0 + relu1 = 1, 1, 0, 2, 0
    I = index_scores(qi, np.array([[1, 2]] * 5, dtype=np.float32), keys)
    check("hand: scores w=(1,2)", np.array_equal(I[4], np.array([1, 1, 0, 2, 0], dtype=np.float32)), str(I[4]))
    want = {  # (t, topk) -> S(t), by hand from I = 1,1,0,2,0
        (0, 2): [0], (1, 2): [0, 1],
        (2, 2): [0, 1],        # 1,1,0: tie 1=1 keeps both, 0 out
        (2, 3): [0, 1, 2],     # t+1 <= topk: all causal
        (3, 2): [0, 3],        # 2 first, then the tie 1 (s0) = 1 (s1): the earlier, s0
        (3, 3): [0, 1, 3],
        (4, 2): [0, 3],        # the future never counts: same scores as t=3 plus s4=0
        (4, 4): [0, 1, 2, 3],  # the tie 0 (s2) = 0 (s4) at the boundary: s2
        (4, 5): [0, 1, 2, 3, 4],
    }
    bad = {k: list(select(I[k[0]], k[0], k[1])) for k, v in want.items() if list(select(I[k[0]], k[0], k[1])) != v}
    check("hand: selections, w=(1,2)", not bad, str(bad) if bad else f"{len(want)} cases")
    # w=(-1,-2): w'=(-0.5,-1). I = -0.5*relu0 - relu1 = -1, -1, 0, -2, 0 (s2, s4: 0 + (-0.5*0) + (-1*0);
    # the zero's sign depends on where the running sum starts, and +0 == -0 for the ranking)
    In = index_scores(qi, np.array([[-1, -2]] * 5, dtype=np.float32), keys)
    check("hand: scores w=(-1,-2) (negative, -0.0)",
          np.array_equal(In[4], np.array([-1, -1, 0, -2, 0], dtype=np.float32)),
          str(In[4]))
    # ranking: s2(0), s4(0) [tie: s2 first], s0(-1), s1(-1) [tie: s0 first], s3(-2)
    want = {(4, 1): [2], (4, 2): [2, 4], (4, 3): [0, 2, 4], (4, 4): [0, 1, 2, 4], (3, 2): [0, 2], (3, 1): [2]}
    bad = {k: list(select(In[k[0]], k[0], k[1])) for k, v in want.items() if list(select(In[k[0]], k[0], k[1])) != v}
    check("hand: selections, w=(-1,-2)", not bad, str(bad) if bad else f"{len(want)} cases")
    # +0.0 (s0) vs -0.0 (s1) are equal: the earlier wins whichever sign it has
    row = np.array([-0.0, 0.0, -1.0], dtype=np.float32)
    row2 = np.array([0.0, -0.0, -1.0], dtype=np.float32)
    check("hand: +0.0 == -0.0", list(select(row, 2, 1)) == [0] and list(select(row2, 2, 1)) == [0])
    # key LayerNorm (§3.1 step 2): x=(1,3): mu=2, biased var=1 -> (x-mu)/sqrt(1+eps) = -+1/sqrt(1+eps);
    # gamma=(2,1), beta=(0.5,0): (0.5 - 2/sqrt(1+eps), 1/sqrt(1+eps)); eps 1e-5 vs 1e-6 must show
    r = 1 / math.sqrt(1 + 1e-5)
    ln = layer_norm(torch.tensor([[1.0, 3.0]]), torch.tensor([2.0, 1.0]), torch.tensor([0.5, 0.0]), 1e-5)[0]
    ln6 = layer_norm(torch.tensor([[1.0, 3.0]]), torch.tensor([2.0, 1.0]), torch.tensor([0.5, 0.0]), 1e-6)[0]
    check("hand: key LayerNorm", abs(float(ln[0]) - (0.5 - 2 * r)) < 3e-7 and abs(float(ln[1]) - r) < 3e-7
          and float(ln6[1]) != float(ln[1]), f"{ln.tolist()}")
    # NaN ranks below every number, -inf included
    row = np.array([np.nan, -np.inf, 3.0, np.nan], dtype=np.float32)
    check("hand: NaN last", list(select(row, 3, 2)) == [1, 2] and list(select(row, 3, 3)) == [0, 1, 2])


def config_checks(src):
    with open(os.path.join(src, "config.json")) as f:
        base = json.load(f)

    def conf(dsa, arch=None, mt="kimi_k3"):
        c = json.loads(json.dumps(base))
        c["model_type"] = mt
        if dsa != "absent":
            c["text_config"]["dsa_config"] = dsa
        c.pop("architectures")
        if arch:
            c["architectures"] = [arch]
        return c

    good = {"index_n_heads": 4, "index_head_dim": 32, "index_topk": 16}
    d = DsaConfig.parse(conf(dict(good), "KimiK31ForConditionalGeneration"))
    check("config: dsa_layers absent -> all full-attention layers",
          d is not None and d.layers == {3, 7, 9} and d.eps == 1e-5 and d.topk == 16)
    check("config: dsa_config null / absent -> dense", DsaConfig.parse(conf(None)) is None
          and DsaConfig.parse(conf("absent", "KimiK3ForConditionalGeneration")) is None)
    check("config: model_type kimi_k31 accepted", DsaConfig.parse(conf(dict(good), mt="kimi_k31")) is not None)
    refused = {
        "unknown key": (dict(good, index_k_norm_eps=1e-6), None, "kimi_k3", "dsa_config.index_k_norm_eps"),
        "topk 0": (dict(good, index_topk=0), None, "kimi_k3", "index_topk"),
        "topk bool": (dict(good, index_topk=True), None, "kimi_k3", "index_topk"),
        "heads missing": ({"index_head_dim": 32, "index_topk": 16}, None, "kimi_k3", "index_n_heads"),
        "subset of layers": (dict(good, dsa_layers=[4, 8]), None, "kimi_k3", "dsa_layers"),
        "a KDA layer": (dict(good, dsa_layers=[1, 4, 8, 10]), None, "kimi_k3", "dsa_layers"),
        "0-based list": (dict(good, dsa_layers=[3, 7, 9]), None, "kimi_k3", "dsa_layers"),
        "K3 arch with dsa": (dict(good), "KimiK3ForConditionalGeneration", "kimi_k3", "architectures"),
        "K3.1 arch without dsa": ("absent", "KimiK31ForConditionalGeneration", "kimi_k3", "architectures"),
        "model_type": (dict(good), None, "kimi_k2", "model_type"),
    }
    for name, (dsa, arch, mt, needle) in refused.items():
        try:
            DsaConfig.parse(conf(dsa, arch, mt))
            check(f"config: refuses {name}", False, "accepted")
        except ValueError as e:
            check(f"config: refuses {name}", needle in str(e), str(e))


def capture_inputs(model, ids):
    """Runs the model; returns {layer module: its input x [T, H]} for every DSA layer."""
    got = {}
    hooks = [m.register_forward_pre_hook(lambda m, a: got.__setitem__(m, a[0][0].detach().clone()))
             for m in model.dsa_layers()]
    with torch.no_grad():
        logits = model(ids)[0]
    for h in hooks:
        h.remove()
    return got, logits


def tie_rule_check(model, ids):
    got, _ = capture_inputs(model, ids)
    bad = 0
    n = 0
    for m in model.dsa_layers():
        I = m.last_scores
        for t in range(I.shape[0]):
            key = sorted(range(t + 1), key=lambda s: (math.isnan(I[t, s]), -float(I[t, s]), s))
            want = sorted(key[: min(m.cfg.dsa.topk, t + 1)])
            n += 1
            bad += list(np.nonzero(m.last_mask[t])[0]) != want
    check("tie-rule: select() vs sorted(key=(nan, -I, s))", bad == 0, f"{n} rows, {bad} differ")


def dense_check(model, k3, ids):
    got, _ = capture_inputs(model, ids)
    T = ids.shape[1]
    topk = model.cfg.dsa.topk
    with torch.no_grad():
        sparse_out = {m: m(x[None])[0] for m, x in got.items()}
        model.cfg.dsa.topk = T  # top-k >= context: S(t) = C(t)
        same = all(torch.equal(m(x[None])[0], MLA.forward(m, x[None])[0]) for m, x in got.items())
        check(f"dense (a): top-k {T} >= context {T}: each DSA layer == dense MLA, bitwise", same)
        full = model(ids)[0]
        ref = k3(ids)[0]
        check("dense (a): top-k >= context: logits == K3 (dense) model's, bitwise", torch.equal(full, ref),
              f"max|d| {float((full - ref).abs().max()):.3g}")
        model.cfg.dsa.topk = topk
        diff = max(float((sparse_out[m] - MLA.forward(m, x[None])[0]).abs().max()) for m, x in got.items())
        check(f"dense (a): top-k {topk} < context {T}: the selection changes the layer outputs", diff > 1e-4,
              f"max|sparse-dense| {diff:.3g}")
        # per-token KDA here: the chunked form's rounding couples the rows of a 32-token chunk
        sparse = model(ids, kda_recurrent=True)[0]
        ref = k3(ids, kda_recurrent=True)[0]
        dl = float((sparse - ref).abs().max())
        check(f"dense: logits rows t < {topk} equal dense K3's bitwise, later rows differ",
              torch.equal(sparse[:topk], ref[:topk]) and dl > 1e-4, f"max|d| later rows {dl:.3g}")


def step_check(model, ids):
    got, _ = capture_inputs(model, ids)
    for i, (m, x) in enumerate(got.items()):
        with torch.no_grad():
            pre = m(x[None])[0]
            mask = m.last_mask
            cache = new_cache()
            steps = []
            sel_ok = True
            for t in range(x.shape[0]):
                steps.append(m.step(x[t], cache))
                sel_ok &= list(m.last_step_sel.numpy()) == list(np.nonzero(mask[t])[0])
            st = torch.stack(steps)
        d = float((pre - st).abs().max())
        scale = float(pre.abs().max())
        check(f"step (b): DSA layer #{i}: prefill == token-by-token", sel_ok and d <= 1e-5 * scale,
              f"T={x.shape[0]}, selections {'same' if sel_ok else 'DIFFER'}, max|d| {d:.2e} (max|out| {scale:.3g})")


def loader_checks(src, tmp):
    out = os.path.join(tmp, "nobias")
    make_test_k31(src, out, bias=False, arch=False, dsa_layers=False)
    _, model, note = load_k31(out)
    zeros = all(torch.count_nonzero(m.indexer.k_norm.bias) == 0 for m in model.dsa_layers())
    check("loader: k_norm.bias absent -> zeros", zeros and "without k_norm.bias" in note, note)
    # a stray indexer tensor on a KDA layer
    bad = os.path.join(tmp, "stray")
    make_test_k31(src, bad)
    extra = {"language_model.model.layers.0.self_attn.indexer.wk.weight":
             ("BF16", np.zeros((32, 128), dtype=np.uint16))}
    st_io.write_safetensors(os.path.join(bad, "model-extra.safetensors"), extra)
    with open(os.path.join(bad, "model.safetensors.index.json")) as f:
        idx = json.load(f)
    idx["weight_map"].update({k: "model-extra.safetensors" for k in extra})
    with open(os.path.join(bad, "model.safetensors.index.json"), "w") as f:
        json.dump(idx, f)
    try:
        load_k31(bad)
        check("loader: refuses an indexer tensor on a KDA layer", False, "accepted")
    except ValueError as e:
        check("loader: refuses an indexer tensor on a KDA layer", "layers.0.self_attn.indexer" in str(e), str(e))
    # wk stored F32
    f32 = os.path.join(tmp, "f32")
    make_test_k31(src, f32)
    p = os.path.join(f32, "model-indexer.safetensors")
    t = st_io.read_safetensors(p)
    t = {n: (d, a) for n, (d, _, a) in t.items()}
    n = "language_model.model.layers.3.self_attn.indexer.wk.weight"
    t[n] = ("F32", st_io.bf16_bits_to_f32(t[n][1]).reshape(t[n][1].shape))
    st_io.write_safetensors(p, t)
    try:
        load_k31(f32)
        check("loader: refuses an F32 wk", False, "accepted")
    except ValueError as e:
        check("loader: refuses an F32 wk", "must be BF16" in str(e), str(e))


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "fixtures", "k3-tiny", "model")
    torch.set_num_threads(min(2, torch.get_num_threads()))
    hand_case()
    config_checks(src)
    tmp = tempfile.mkdtemp(prefix="k31self-")
    try:
        out = os.path.join(tmp, "k31")
        make_test_k31(src, out, topk=16)
        _, model, note = load_k31(out)
        model.eval()
        print(f"test checkpoint from {src}: {note}")
        _, k3 = load_hf(src)
        k3.eval()
        ids = torch.from_numpy(np.random.RandomState(7).randint(0, model.cfg.vocab_size, (1, 200))).long()
        tie_rule_check(model, ids)
        dense_check(model, k3, ids[:, :64])
        step_check(model, ids[:, :80])
        loader_checks(src, tmp)
    finally:
        shutil.rmtree(tmp)
    print("PASS" if not FAILS else f"FAIL ({len(FAILS)}): {', '.join(FAILS)}")
    return 0 if not FAILS else 1


if __name__ == "__main__":
    sys.exit(main())
