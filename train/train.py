#!/usr/bin/env python3
"""Trains nanoK3 on the GPU and exports it in K3's checkpoint layout.

Usage (device machine, repository root):
  python3 train/train.py --out $OUT --steps 2400 --batch 256 --seq 256 --seed 1234
  python3 train/train.py --out $OUT --bench          # speed/memory smoke test, no export

Reads train/data/{train,heldout}.bin (uint16 tokens, from build_corpus.py). Writes under --out:
  nanok3/ (config.json, model-0000k-of-00004.safetensors, model.safetensors.index.json) and
  train_log.json (loss curve, held-out losses, expert loads, timings, QAT cost).
Reproducible: the same seed, steps and batch give the same batches and initial weights
(GPU kernels may still differ in the last bits from run to run).
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
import k3model  # noqa: E402
from k3model import K3Config, K3Model, init_weights  # noqa: E402
from nanok3_config import make_config, disk_bytes  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def batches(data, n, seq, gen, device):
    """n random windows of seq+1 tokens; offsets drawn on the CPU from a seeded generator,
    the gather done where the data lives (the GPU)."""
    starts = torch.randint(0, data.numel() - seq - 1, (n,), generator=gen).to(data.device)
    idx = starts[:, None] + torch.arange(seq + 1, device=data.device)[None, :]
    b = data[idx].long()
    return b[:, :-1], b[:, 1:]


def loss_of(model, x, y):
    with torch.autocast(x.device.type, dtype=torch.bfloat16):
        logits = model(x)
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))


@torch.no_grad()
def evaluate(model, hx, hy, bs=64):
    """Mean held-out loss, eager (no compiled functions, so no extra compilation)."""
    saved = dict(k3model._COMPILED)
    k3model._COMPILED.clear()
    model.eval()
    tot, n = 0.0, 0
    for i in range(0, hx.shape[0], bs):
        l = loss_of(model, hx[i:i + bs], hy[i:i + bs])
        tot += l.item() * hx[i:i + bs].numel()
        n += hx[i:i + bs].numel()
    model.train()
    k3model._COMPILED.update(saved)
    return tot / n


def param_groups(model, wd):
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.dim() >= 2 and "res_proj" not in n else no_decay).append(p)
    return [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.05)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--qat-from", type=float, default=0.3, help="fraction of steps after which MXFP4 QAT is on")
    ap.add_argument("--bias-rate", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--time-limit", type=float, default=560.0, help="seconds; stop training early if reached")
    ap.add_argument("--time-budget", type=float, default=0.0,
                    help="if set, --steps is chosen at step 40 from the measured speed so that training "
                         "ends this many seconds after start (the log records the steps for a rerun)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the KDA chunk and AttnRes functions")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="a tiny shape, for checking the script on a CPU")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device(args.device)
    on_gpu = dev.type == "cuda"
    dev_name = torch.cuda.get_device_name(0) if on_gpu else "cpu"
    log(f"torch {torch.__version__}, {dev_name}")

    if args.tiny:
        from nanok3_config import SHAPE
        s = dict(SHAPE)
        s.update(hidden=64, heads=2, kda_dim=32, experts=64, top_k=8, latent=32, moe_inter=32,
                 dense_inter=64, q_lora=32, kv_lora=32)
        conf = make_config(s)
    else:
        conf = make_config()
    cfg = K3Config(conf["text_config"])
    model = K3Model(cfg)
    init_weights(model, args.seed)
    model = model.to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"params {n_params / 1e6:.2f}M, export size {disk_bytes(model) / 1e6:.2f} MB")

    train = torch.from_numpy(np.fromfile(os.path.join(HERE, "data", "train.bin"), dtype=np.uint16).astype(np.int32)).to(dev)
    held = torch.from_numpy(np.fromfile(os.path.join(HERE, "data", "heldout.bin"), dtype=np.uint16).astype(np.int32))
    log(f"train tokens {train.numel()}, held-out tokens {held.numel()}")
    n_eval = min(128, (held.numel() - 1) // args.seq)
    he = held[: n_eval * args.seq + 1]
    hx = he[:-1].reshape(n_eval, args.seq).to(dev).long()
    hy = he[1:].reshape(n_eval, args.seq).to(dev).long()

    opt = torch.optim.AdamW(param_groups(model, args.wd), lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
                            **({"fused": True} if on_gpu else {}))
    gen = torch.Generator().manual_seed(args.seed + 1)

    if args.bench:
        # speed and memory of eager vs compiled steps at the configured batch and length
        res = {}
        for variant in ("eager", "eager_qat", "compiled_qat"):
            if variant.startswith("compiled"):
                import torch._dynamo as dynamo
                dynamo.config.cache_size_limit = 64
                k3model.enable_compile()
            model.set_qat(variant.endswith("qat"))
            torch.cuda.reset_peak_memory_stats()
            t0 = time.time()
            try:
                for i in range(12):
                    if i == 4:
                        torch.cuda.synchronize()
                        t_first, t0 = time.time() - t0, time.time()
                    x, y = batches(train, args.batch, args.seq, gen, dev)
                    loss = loss_of(model, x, y)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                torch.cuda.synchronize()
            except Exception as e:
                log(f"{variant} failed: {type(e).__name__}: {str(e)[:500]}")
                res[variant] = {"error": str(e)[:2000]}
                continue
            dt = (time.time() - t0) / 8
            res[variant] = {"s_per_step": dt, "tok_per_s": args.batch * args.seq / dt, "first4_s": t_first,
                            "peak_GB": torch.cuda.max_memory_allocated() / 1e9, "loss": loss.item()}
            log(f"{variant}: {dt * 1000:.0f} ms/step, {args.batch * args.seq / dt / 1e3:.0f}k tok/s, first 4 steps "
                f"{t_first:.1f}s, peak {torch.cuda.max_memory_allocated() / 1e9:.1f} GB, loss {loss.item():.3f}")
        t0 = time.time()
        res["heldout_loss"] = evaluate(model, hx, hy)
        log(f"held-out loss {res['heldout_loss']:.3f} (eval {time.time() - t0:.1f}s)")
        with open(os.path.join(args.out, "bench.json"), "w") as f:
            json.dump(res, f, indent=1)
        return

    if args.compile:
        import torch._dynamo as dynamo
        dynamo.config.cache_size_limit = 64
        k3model.enable_compile()
        log("compiling the KDA chunk and AttnRes functions")
    moes = model.moe_layers()
    hist = {"step": [], "loss": [], "lr": [], "time": [], "tokens": []}
    evals = []
    qat_on = False
    probe = 40 if args.time_budget > 0 else -1
    t_train = time.time()
    tokens = 0
    step = 0
    load_hist = []
    while step < args.steps:
        if not qat_on and step >= int(args.qat_from * args.steps) and step != probe:
            qat_on = True
            model.set_qat(True)
            log(f"step {step}: MXFP4 QAT on")
        if step < args.warmup:
            lr = args.lr * (step + 1) / args.warmup
        else:
            p = (step - args.warmup) / max(1, args.steps - args.warmup)
            lr = args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * p)))
        for g in opt.param_groups:
            g["lr"] = lr
        if step == 10:
            torch.cuda.synchronize() if on_gpu else None
            t10 = time.time()
        if step == probe:
            torch.cuda.synchronize() if on_gpu else None
            per = (time.time() - t10) / (probe - 10) * 1.04  # QAT adds a few percent later
            left = args.time_budget - (time.time() - t_start)
            n_evals = 6
            args.steps = probe + max(1, int((left - n_evals * 2.0) / per))
            args.eval_every = max(50, args.steps // n_evals)
            log(f"{per * 1000:.0f} ms/step after warm-up: training for {args.steps} steps "
                f"({args.steps * args.batch * args.seq / 1e6:.0f}M tokens)")
        x, y = batches(train, args.batch, args.seq, gen, dev)
        opt.zero_grad(set_to_none=True)
        try:
            loss = loss_of(model, x, y)
            loss.backward()
        except Exception as e:  # a compile failure: continue eagerly
            if not k3model._COMPILED:
                raise
            log(f"compiled step failed ({type(e).__name__}: {str(e)[:300]}); continuing eagerly")
            k3model.disable_compile()
            opt.zero_grad(set_to_none=True)
            loss = loss_of(model, x, y)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():  # auxiliary-loss-free balancing: nudge the selection bias
            for m in moes:
                c = m.last_counts.float()
                m.e_score_correction_bias += args.bias_rate * torch.sign(c.mean() - c)
        tokens += x.numel()
        step += 1
        if step % 25 == 0 or step == 1:
            hist["step"].append(step)
            hist["loss"].append(loss.item())
            hist["lr"].append(lr)
            hist["time"].append(time.time() - t_train)
            hist["tokens"].append(tokens)
        if step % 100 == 0:
            loads = torch.stack([m.last_counts.float() for m in moes])
            dropped = torch.stack([m.last_dropped.float() for m in moes]) / (x.numel() * cfg.top_k)
            load_hist.append({"step": step, "max_over_mean": (loads.max(1).values / loads.mean(1)).tolist(),
                              "min_over_mean": (loads.min(1).values / loads.mean(1)).tolist(),
                              "dropped_frac": dropped.tolist()})
            log(f"step {step} loss {loss.item():.4f} lr {lr:.2e} {tokens / (time.time() - t_train) / 1e3:.0f}k tok/s "
                f"load max/mean {max(load_hist[-1]['max_over_mean']):.2f} min/mean {min(load_hist[-1]['min_over_mean']):.2f} "
                f"dropped {max(load_hist[-1]['dropped_frac']):.4f}")
        if step % args.eval_every == 0 or step == args.steps:
            evals.append({"step": step, "tokens": tokens, "heldout_loss": evaluate(model, hx, hy)})
            log(f"step {step} held-out loss {evals[-1]['heldout_loss']:.4f}")
        if time.time() - t_start > args.time_limit:
            log(f"time limit reached at step {step}; stopping")
            break
    train_s = time.time() - t_train

    # QAT cost: the same weights with and without MXFP4 on the routed experts
    model.set_qat(True)
    loss_q = evaluate(model, hx, hy)
    model.set_qat(False)
    loss_f = evaluate(model, hx, hy)
    model.set_qat(True)
    log(f"held-out loss: MXFP4 experts {loss_q:.4f}, unquantized master {loss_f:.4f}")

    from k3io import export_hf  # noqa: E402
    model = model.float().cpu()
    total = export_hf(model, conf, os.path.join(args.out, "nanok3"), n_shards=4)
    log(f"exported {total / 1e6:.2f} MB of tensors")
    out = {"args": vars(args),
           "rerun": f"python3 train/train.py --out OUT --steps {step} --batch {args.batch} --seq {args.seq} "
                    f"--lr {args.lr} --warmup {args.warmup} --seed {args.seed}"
                    + (" --compile" if args.compile else ""), "steps_done": step, "tokens_seen": tokens, "train_seconds": train_s,
           "params": n_params, "history": hist, "evals": evals, "loads": load_hist,
           "heldout_loss_mxfp4": loss_q, "heldout_loss_master": loss_f,
           "eval_tokens": int(hx.numel()), "torch": torch.__version__,
           "device": dev_name, "total_seconds": time.time() - t_start}
    with open(os.path.join(args.out, "train_log.json"), "w") as f:
        json.dump(out, f)
    log(f"done in {time.time() - t_start:.0f}s")


if __name__ == "__main__":
    main()
