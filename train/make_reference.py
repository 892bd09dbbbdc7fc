#!/usr/bin/python3
"""Reference numbers, statistics and figures for an exported nanoK3 (CPU, fp32).

Usage: /usr/bin/python3 train/make_reference.py [--model models/nanok3] [--log train_log.json]

Everything is computed by the trainer's forward pass (train/k3model.py) on the EXPORTED
checkpoint: BF16 spine and F32 tensors as stored, routed experts dequantized from MXFP4,
all activations fp32. Writes into the model directory:
  reference.json   held-out perplexity (exact protocol inside), greedy continuations,
                   last-position logits, for sluice's test to compare against;
  stats.json       held-out perplexity over all of heldout.txt, unigram baseline,
                   per-layer expert usage, greedy samples as text;
  loss.png, experts.png  (when --log is given / always).
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
from k3io import load_hf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PPL_TOKENS = 512
GREEDY_N = 16
# Greedy prompts for reference.json. Chosen from a larger candidate list so that every greedy
# step's top-2 logit gap is >= 0.04 (see min_top2_gap): fp32 rounding differences (~1e-4) between
# engines cannot flip them. "And the LORD spake unto Moses, saying," (gap 0.006), "And God said,"
# (0.000) and "Blessed are the" (0.002) were rejected for that reason.
PROMPTS = [
    "In the beginning God created",
    "Thou shalt not",
    "A fool and his money",
    "Love is",
    "Linux",
    "Dictionary, n.",
]
# prompts for the longer samples in stats.json / the model card
SAMPLE_PROMPTS = [
    "In the beginning God created",
    "And the LORD spake unto Moses, saying,",
    "The kernel",
    "A fool and his money",
]


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


@torch.no_grad()
def greedy(model, ids, n):
    out, gaps = [], []
    seq = list(ids)
    for _ in range(n):
        logits = model(torch.tensor([seq]))[0, -1]
        top = torch.topk(logits, 2)
        out.append(int(top.indices[0]))
        gaps.append(float(top.values[0] - top.values[1]))
        seq.append(out[-1])
    return out, gaps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "nanok3"))
    ap.add_argument("--log", default=None, help="train_log.json from train.py")
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--skip-stats", action="store_true", help="write reference.json only")
    args = ap.parse_args()
    torch.set_num_threads(2)
    md = args.model
    conf, model = load_hf(md)
    model.eval()
    cfg = model.cfg
    tok = bpe.Tokenizer(md)
    text = open(os.path.join(md, "heldout.txt"), encoding="utf-8").read()
    ids = tok.encode(text)
    log(f"heldout.txt: {len(text.encode())} bytes, {len(ids)} tokens")

    # (a) perplexity of the first PPL_TOKENS tokens as one sequence, no BOS
    first = ids[:PPL_TOKENS]
    with torch.no_grad():
        logits = model(torch.tensor([first]))[0]
    nll = F.cross_entropy(logits[:-1], torch.tensor(first[1:]), reduction="none")
    ppl = math.exp(nll.mean().item())
    log(f"reference perplexity over {len(first)} tokens: {ppl:.4f}")

    # (b) greedy continuations, (c) last-position logits of prompt 0
    cases = []
    for p in PROMPTS:
        pid = tok.encode(p)
        g, gaps = greedy(model, pid, GREEDY_N)
        cases.append({"prompt": p, "prompt_ids": pid, "greedy_ids": g, "greedy_text": tok.decode(g),
                      "min_top2_gap": min(gaps)})
        log(f"greedy {p!r} -> {tok.decode(g)!r} (min top-2 gap {min(gaps):.3f})")
    p0 = cases[0]["prompt_ids"]
    with torch.no_grad():
        last = model(torch.tensor([p0]))[0, -1]
    ref = {
        "model": "nanok3",
        "computed_by": "train/make_reference.py: trainer forward pass (train/k3model.py), fp32 activations, "
                       "on the exported weights (BF16 spine as stored, routed experts dequantized from MXFP4)",
        "perplexity": {
            "protocol": f"tokenize models/nanok3/heldout.txt with the model's tokenizer (no special-token parsing, "
                        f"no BOS); take the first {len(first)} tokens as ONE sequence (context {len(first)}); "
                        f"perplexity = exp(mean over t=1..{len(first) - 1} of -log p(token[t] | tokens[0..t-1]))",
            "n_tokens": len(first),
            "n_predicted": len(first) - 1,
            "token_ids": first,
            "mean_nll": nll.mean().item(),
            "perplexity": ppl,
            "tolerance_relative": 0.005,
        },
        "greedy": {
            "protocol": f"prompt token ids as given (no BOS), {GREEDY_N} greedy (argmax) steps, "
                        "no stopping on special tokens",
            "cases": cases,
        },
        "last_logits": {
            "prompt_ids": p0,
            "first_32": [float(x) for x in last[:32]],
            "argmax": int(last.argmax()),
            "max": float(last.max()),
        },
    }
    with open(os.path.join(md, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")

    if args.skip_stats:
        return
    # statistics over all of heldout.txt: windows of args.window tokens
    W = args.window
    tot_nll, n_pred = 0.0, 0
    usage = np.zeros((len(model.moe_layers()), cfg.num_experts), dtype=np.int64)
    for s in range(0, len(ids) - 1, W):
        chunk = ids[s:s + W]
        if len(chunk) < 2:
            break
        with torch.no_grad():
            lg = model(torch.tensor([chunk]))[0]
        tot_nll += F.cross_entropy(lg[:-1], torch.tensor(chunk[1:]), reduction="sum").item()
        n_pred += len(chunk) - 1
        for i, m in enumerate(model.moe_layers()):
            usage[i] += np.bincount(m.last_idx.reshape(-1).numpy(), minlength=cfg.num_experts)
    ppl_all = math.exp(tot_nll / n_pred)
    # unigram baseline from the training tokens (add-one smoothing over the BPE ranks)
    train_ids = np.fromfile(os.path.join(ROOT, "train", "data", "train.bin"), dtype=np.uint16)
    cnt = np.bincount(train_ids, minlength=cfg.vocab_size).astype(np.float64) + 1.0
    lp = np.log(cnt / cnt.sum())
    ev = []
    for s in range(0, len(ids) - 1, W):
        ev.extend(ids[s + 1:s + W])
    uni_ppl = math.exp(-lp[np.array(ev)].mean())
    bytes_per_tok = len(text.encode()) / len(ids)
    log(f"heldout.txt perplexity {ppl_all:.3f} over {n_pred} predictions (windows of {W}); "
        f"unigram {uni_ppl:.1f}; unused experts per layer {(usage == 0).sum(1).tolist()}")
    stats = {"heldout_txt_tokens": len(ids), "heldout_txt_bytes": len(text.encode()), "window": W,
             "predictions": n_pred, "perplexity": ppl_all, "unigram_perplexity": uni_ppl,
             "bits_per_byte": tot_nll / n_pred / math.log(2) / bytes_per_tok,
             "expert_usage": usage.tolist(), "unused_experts_per_layer": (usage == 0).sum(1).tolist()}
    # longer greedy samples for the model card
    samples = []
    for p in SAMPLE_PROMPTS:
        g, _ = greedy(model, tok.encode(p), 48)
        samples.append({"prompt": p, "continuation": tok.decode(g)})
    stats["samples_48"] = samples
    with open(os.path.join(md, "stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
        f.write("\n")
    plots(md, usage, args.log)


def plots(md, usage, log_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    L, E = usage.shape
    fig, ax = plt.subplots(figsize=(10, 0.5 * L + 1.5))
    share = usage / usage.sum(1, keepdims=True) * E
    im = ax.imshow(share, aspect="auto", cmap="viridis")
    ax.set_xlabel("routed expert id")
    ax.set_ylabel("MoE layer")
    ax.set_yticks(range(L))
    ax.set_yticklabels([str(i + 1) for i in range(L)])
    ax.set_title("nanoK3 expert usage on heldout.txt (share x num_experts; 1.0 = uniform)")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(os.path.join(md, "experts.png"), dpi=80)
    plt.close(fig)
    if log_path:
        with open(log_path) as f:
            lg = json.load(f)
        h = lg["history"]
        fig, ax = plt.subplots(figsize=(8, 4.5))
        tok = np.array(h["tokens"]) / 1e6
        ax.plot(tok, h["loss"], label="train loss (batch)", lw=1)
        ev = lg["evals"]
        ax.plot([e["tokens"] / 1e6 for e in ev], [e["heldout_loss"] for e in ev], "o-", label="held-out loss")
        ax.set_xlabel("tokens seen (millions)")
        ax.set_ylabel("cross-entropy (nats/token)")
        ax.set_ylim(top=min(8, max(h["loss"]) + 0.2))
        ax.grid(alpha=0.3)
        ax.legend()
        ax.set_title("nanoK3 training")
        fig.tight_layout()
        fig.savefig(os.path.join(md, "loss.png"), dpi=80)
        plt.close(fig)


if __name__ == "__main__":
    main()
