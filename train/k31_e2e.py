#!/usr/bin/python3
"""End to end: sluice's K3.1 logits against the independent reference (ctest k31_reference).

Usage: /usr/bin/python3 train/k31_e2e.py SLUICE WORKDIR

  sluice make-model --preset k31-tiny --out WORKDIR/model
  sluice logits --model WORKDIR/model --tokens <ids> --out F --mode prefill|step
      for prompts of 64 and 600 ids (numpy RandomState(31), ids below bos_token_id)
  check_k31's comparison of each file with the reference's logits (loaded once per prompt).
Exits 1 on any failure, naming the step (a missing k31-tiny preset fails at the first one).
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_k31 import compare, read_logits, reference_logits  # noqa: E402
from k31io import load_k31  # noqa: E402

LENGTHS = (64, 600)
MODES = ("prefill", "step")


def sluice(exe, *args):
    r = subprocess.run([exe, *args], capture_output=True, text=True)
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        raise RuntimeError(f"`sluice {' '.join(args[:3])} ...` failed (rc {r.returncode}): {tail}")
    return r


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    exe, work = sys.argv[1], sys.argv[2]
    torch.set_num_threads(min(2, torch.get_num_threads()))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model_dir = os.path.join(work, "model")
    try:
        sluice(exe, "make-model", "--preset", "k31-tiny", "--out", model_dir)
    except RuntimeError as e:
        print(f"k31_reference: {e}\nk31_reference: the engine cannot write the k31-tiny preset "
              f"(issue 36 item 3); nothing to compare")
        return 1
    with open(os.path.join(model_dir, "config.json")) as f:
        conf = json.load(f)
    tc = conf.get("text_config", conf)
    if not tc.get("dsa_config"):
        print("k31_reference: make-model --preset k31-tiny wrote no dsa_config")
        return 1
    _, model, note = load_k31(model_dir)
    model.eval()
    print(f"reference: {note}")
    hi = min(model.cfg.vocab_size, tc.get("bos_token_id") or model.cfg.vocab_size)
    ids_all = [int(x) for x in np.random.RandomState(31).randint(0, hi, max(LENGTHS))]
    ok = True
    for n in LENGTHS:
        ids = ids_all[:n]
        ref, gap = reference_logits(model, ids)
        for mode in MODES:
            out = os.path.join(work, f"logits-{n}-{mode}.f32")
            label = f"{n} tokens, --mode {mode}"
            try:
                sluice(exe, "logits", "--model", model_dir, "--tokens", ",".join(map(str, ids)),
                       "--out", out, "--mode", mode)
                got = read_logits(out, n, model.cfg.vocab_size)
            except (RuntimeError, ValueError) as e:
                print(f"k31 check {label}: {e}: FAIL")
                ok = False
                continue
            good, line = compare(ref, got, label, gap)
            print(line)
            ok &= good
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
