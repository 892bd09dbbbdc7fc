#!/usr/bin/python3
"""Checks the trainer's K3 forward pass against the k3-tiny golden fixture.

Usage: /usr/bin/python3 train/check_fixture.py [FIXTURE_DIR]   (default tests/fixtures/k3-tiny)

For every case: logits of every prompt position, logits of the 16 greedy positions (one
causal pass over prompt + greedy tokens), per-layer partial sums (`hidden`), routed expert
ids, all in fp32 on the CPU, with the chunked KDA and, for the short cases, the plain
recurrence too. Exits 1 if max |logit diff| > 1e-3, any argmax or expert choice differs.
"""
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from k3io import load_hf  # noqa: E402

TOL = 1e-3


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    fx = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "fixtures", "k3-tiny")
    torch.set_num_threads(min(2, torch.get_num_threads()))
    t0 = time.time()
    conf, model = load_hf(os.path.join(fx, "model"))
    model.eval()
    cfg = model.cfg
    print(f"fixture {os.path.relpath(fx, root)}: loaded {sum(p.numel() for p in model.state_dict().values())} values "
          f"(layers {cfg.num_layers}, MLA {[l + 1 for l in range(cfg.num_layers) if cfg.is_mla[l]]}, "
          f"experts {cfg.num_experts} top-{cfg.top_k}) in {time.time() - t0:.2f}s")
    with open(os.path.join(fx, "manifest.json")) as f:
        manifest = json.load(f)
    ok = True
    worst = 0.0
    for case in manifest["cases"]:
        name = case["name"]
        with open(os.path.join(fx, case["file"])) as f:
            cj = json.load(f)
        toks = cj["tokens"]
        greedy = cj["greedy"]["tokens"]
        n = len(toks)
        V = cfg.vocab_size
        ref_logits = np.fromfile(os.path.join(fx, "cases", f"{name}.logits.f32"), dtype=np.float32).reshape(n, V)
        ref_glog = np.fromfile(os.path.join(fx, "cases", f"{name}.greedy_logits.f32"), dtype=np.float32).reshape(-1, V)
        ref_hidden = np.fromfile(os.path.join(fx, "cases", f"{name}.hidden.f32"), dtype=np.float32).reshape(
            cfg.num_layers, n, cfg.hidden_size)
        ref_exp = np.fromfile(os.path.join(fx, "cases", f"{name}.experts.i32"), dtype=np.int32).reshape(
            cfg.num_layers - cfg.first_dense, n, cfg.top_k)
        ids = torch.tensor([toks + greedy], dtype=torch.long)
        with torch.no_grad():
            hid = []
            logits = model(ids, collect=hid)[0].numpy()
            experts = np.stack([m.last_idx.numpy()[:n] for m in model.moe_layers()])
            hidden = np.stack([h[0, :n].numpy() for h in hid])
        d_log = float(np.abs(logits[:n] - ref_logits).max())
        d_glog = float(np.abs(logits[n:n + len(ref_glog)] - ref_glog).max())
        d_hid = float(np.abs(hidden - ref_hidden).max())
        argmax_ok = bool((logits[:n].argmax(-1) == ref_logits.argmax(-1)).all())
        pred_greedy = [int(logits[n - 1].argmax())] + [int(x) for x in logits[n:n + len(greedy) - 1].argmax(-1)]
        greedy_ok = pred_greedy == greedy
        exp_ok = bool((experts == ref_exp).all())
        line = (f"case {name:7s} n={n:3d}  max|dlogit| {d_log:.2e}  greedy-rows {d_glog:.2e}  "
                f"max|dhidden| {d_hid:.2e}  argmax {'ok' if argmax_ok else 'DIFF'}  "
                f"greedy {'ok' if greedy_ok else 'DIFF'}  experts {'ok' if exp_ok else 'DIFF'}")
        if n <= 64:
            with torch.no_grad():
                rec = model(ids, kda_recurrent=True)[0].numpy()
            d_rec = float(np.abs(rec - logits).max())
            line += f"  chunked-vs-recurrent {d_rec:.2e}"
            ok &= d_rec <= TOL
        print(line)
        worst = max(worst, d_log, d_glog)
        ok &= d_log <= TOL and d_glog <= TOL and argmax_ok and greedy_ok and exp_ok
    print(f"worst max|dlogit| {worst:.2e} (tolerance {TOL:g}); torch {torch.__version__}; "
          f"{time.time() - t0:.1f}s")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
