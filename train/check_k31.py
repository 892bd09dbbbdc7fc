#!/usr/bin/python3
"""Compares sluice's logits on a K3.1 checkpoint with the independent reference (train/k31model.py).

Usage: /usr/bin/python3 train/check_k31.py MODEL_DIR --tokens 1,2,3 --logits FILE [--label NAME]

FILE is `sluice logits --out`'s format: float32 little-endian [n_tokens][vocab]. Per position t:
max |engine - reference| <= 1e-3 * max |reference logit| and the same argmax. Prints one summary
line (after at most 5 lines naming failing positions) and exits 1 on a mismatch, 2 on bad input.
The summary also gives the smallest relative score gap at the top-k boundary (over all DSA
layers and rows t >= top-k): a near-tie there is where an fp32 engine may legitimately pick
another position, so a failure next to a tiny gap points at rounding, not at the formula.
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from k31io import load_k31  # noqa: E402

TOL = 1e-3


def reference_logits(model, ids):
    """ids: list of ints -> (logits [n, vocab] numpy fp32, boundary gap info)."""
    with torch.no_grad():
        logits = model(torch.tensor([ids], dtype=torch.long))[0].float().numpy()
    return logits, boundary_gap(model)


def boundary_gap(model):
    """Over DSA layers and rows t >= topk: (smallest nonzero (k-th best - (k+1)-th best) /
    max|I(t,.)|, its layer, its t, the number of rows with an exact tie at the boundary — those
    the tie rule settles, the same in any implementation that computes the same fp32 values)."""
    best, ties = None, 0
    for i, m in enumerate(model.dsa_layers()):
        I, k = m.last_scores, m.cfg.dsa.topk
        for t in range(k, I.shape[0]):
            row = np.sort(I[t, : t + 1])[::-1]
            scale = float(np.abs(row).max()) or 1.0
            g = float(row[k - 1] - row[k]) / scale
            if g == 0:
                ties += 1
            elif best is None or g < best[0]:
                best = (g, i, t)
    if best is None and ties == 0:
        return None
    return (best or (float("inf"), -1, -1)) + (ties,)


def compare(ref, got, label, gap=None):
    """ref, got [n, vocab]. Returns (ok, summary line); prints up to 5 failing positions."""
    n = ref.shape[0]
    d = np.abs(got.astype(np.float64) - ref).max(-1)
    scale = np.abs(ref).max(-1)
    rel = d / np.maximum(scale, 1e-30)
    am_ref, am_got = ref.argmax(-1), got.argmax(-1)
    bad = [t for t in range(n) if rel[t] > TOL or am_ref[t] != am_got[t] or not np.isfinite(got[t]).all()]
    for t in bad[:5]:
        print(f"  {label}: position {t}: max|d| {d[t]:.3g} = {rel[t]:.3g} of max|logit| {scale[t]:.3g}; "
              f"argmax engine {am_got[t]} reference {am_ref[t]}")
    worst = int(np.argmax(rel))
    line = (f"k31 check {label}: n={n} worst rel {rel[worst]:.2e} at t={worst} (tol {TOL:g}), "
            f"argmax {n - sum(am_ref != am_got)}/{n} same")
    if gap is not None:
        line += (f", top-k boundary: min gap {gap[0]:.2e} of max|I| (DSA layer #{gap[1]}, t={gap[2]}), "
                 f"{gap[3]} exact ties")
    else:
        line += ", selection not active (no row t >= top-k)"
    line += f": {'PASS' if not bad else f'FAIL ({len(bad)} positions)'}"
    return not bad, line


def read_logits(path, n, vocab):
    size = os.path.getsize(path)
    if size != n * vocab * 4:
        raise ValueError(f"{path}: {size} bytes, expected {n} tokens x {vocab} vocab x 4")
    return np.fromfile(path, dtype="<f4").reshape(n, vocab)


def parse_tokens(s):
    return [int(x) for x in s.replace(",", " ").split()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--tokens", required=True, help="comma-separated ids (as sluice logits --tokens)")
    ap.add_argument("--logits", required=True, help="sluice logits --out FILE")
    ap.add_argument("--label", default="logits")
    a = ap.parse_args()
    torch.set_num_threads(min(2, torch.get_num_threads()))
    try:
        ids = parse_tokens(a.tokens)
        _, model, note = load_k31(a.model_dir)
        model.eval()
        got = read_logits(a.logits, len(ids), model.cfg.vocab_size)
    except (ValueError, KeyError, OSError) as e:
        print(f"check_k31: {e}")
        return 2
    print(f"reference: {note}")
    ref, gap = reference_logits(model, ids)
    ok, line = compare(ref, got, a.label, gap)
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
