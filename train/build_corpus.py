#!/usr/bin/python3
"""Builds nanoK3's corpus, tokenizer and token files from Debian packages.

Usage: /usr/bin/python3 train/build_corpus.py [--work /tmp/nanok3-corpus]

Steps (deterministic; needs apt-get download, dpkg -x, python3-regex):
  1. download and unpack bible-kjv, bible-kjv-text, dict-gcide, fortunes, fortunes-min,
     jargon-text, linux-doc-6.1 into WORK (nothing is installed);
  2. clean each source into documents; every 50th document of each source is held out;
  3. learn the BPE (8192 ranks) on the training documents, write models/nanok3/tiktoken.model
     and tokenizer_config.json;
  4. tokenize: train/data/train.bin and train/data/heldout.bin (uint16, documents joined
     by a blank line), train/data/corpus.json (sources, sizes, token counts), and
     models/nanok3/heldout.txt (the start of the held-out documents, sources interleaved).
"""
import argparse
import glob
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_DIR = os.path.join(ROOT, "models", "nanok3")
DATA_DIR = os.path.join(ROOT, "train", "data")
PACKAGES = ["bible-kjv", "bible-kjv-text", "dict-gcide", "fortunes", "fortunes-min",
            "jargon-text", "linux-doc-6.1"]
N_RANKS = 8192
HELDOUT_EVERY = 50
HELDOUT_TXT_BYTES = 40_000


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def fetch(work):
    deb_dir = os.path.join(work, "debs")
    root = os.path.join(work, "root")
    os.makedirs(deb_dir, exist_ok=True)
    versions = {}
    for p in PACKAGES:
        if not glob.glob(os.path.join(deb_dir, p + "_*.deb")):
            subprocess.run(["apt-get", "download", p], cwd=deb_dir, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deb = sorted(glob.glob(os.path.join(deb_dir, p + "_*.deb")))[-1]
        versions[p] = os.path.basename(deb)
        subprocess.run(["dpkg", "-x", deb, root], check=True)
    return root, versions


def unwrap(block):
    """Joins the lines of each blank-line separated paragraph into one line."""
    paras = re.split(r"\n\s*\n", block)
    out = [" ".join(p.split()) for p in paras]
    return "\n".join(p for p in out if p)


def kjv_docs(root):
    text = subprocess.run([os.path.join(root, "usr/bin/bible"), "-p", os.path.join(root, "usr/lib"),
                           "-l1000000", "gen1:1-rev22:21"], check=True, capture_output=True,
                          text=True).stdout
    docs = []
    cur = None
    for line in text.split("\n"):
        if not line.strip():
            continue
        m = re.match(r"^\s+(\d+) (.*)$", line)
        if m:
            cur.append(m.group(2).strip())
        else:
            cur = [line.strip()]
            docs.append(cur)
    return ["\n".join(d) for d in docs if len(d) > 1]


def fortune_docs(root):
    docs = []
    for path in sorted(glob.glob(os.path.join(root, "usr/share/games/fortunes/*"))):
        name = os.path.basename(path)
        if "." in name or name in ("ascii-art",) or os.path.islink(path):
            continue
        raw = open(path, "rb").read().decode("utf-8", errors="replace")
        for f in raw.split("\n%\n"):
            f = "\n".join(l.replace("\t", "    ").rstrip() for l in f.strip("\n%").split("\n"))
            f = re.sub(r".\x08", "", f).strip()  # overstrike sequences
            if f:
                docs.append(f)
    # fortunes-min ships a subset of the same files: keep the first copy of each
    seen, out = set(), []
    for d in docs:
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


GCIDE_MARK = re.compile(r"^\s*\[[^\]\n]*(Webster|WordNet|PJC|Suppl|Century|RB|MW|Chambers|Am\.|Ld|Obs|JC)[^\]\n]*\]\s*$")


def gcide_docs(root):
    raw = gzip.open(os.path.join(root, "usr/share/dictd/gcide.dict.dz")).read().decode("utf-8", "replace")
    blocks = re.split(r"\n(?=\S)", raw)
    docs = []
    for b in blocks:
        if b.startswith("00-") or "General Public License" in b or "* * * *" in b or "Begin file" in b:
            continue
        lines = [l for l in b.split("\n") if not GCIDE_MARK.match(l)]
        t = "\n".join(lines)
        t = re.sub(r" ?\\[^\\\n]*\\", "", t)  # pronunciation \Af*fect"\
        t = t.replace("{", "").replace("}", "")
        t = unwrap(t)
        if len(t) > 20:
            docs.append(t)
    return docs


def jargon_docs(root):
    raw = gzip.open(os.path.join(root, "usr/share/doc/jargon-text/jargon.txt.gz")).read().decode("utf-8", "replace")
    # entries are separated by blank lines; unwrap each paragraph, drop the glossary list
    paras = [" ".join(p.split()) for p in re.split(r"\n\s*\n", raw)]
    paras = [p for p in paras if len(p) > 40]
    docs, cur = [], []
    for p in paras:
        cur.append(p)
        if sum(len(x) for x in cur) > 600:
            docs.append("\n".join(cur))
            cur = []
    if cur:
        docs.append("\n".join(cur))
    return docs


def kernel_docs(root):
    base = os.path.join(root, "usr/share/doc/linux-doc-6.1/Documentation")
    files = sorted(glob.glob(os.path.join(base, "**/*.rst.gz"), recursive=True)
                   + glob.glob(os.path.join(base, "**/*.txt.gz"), recursive=True))
    files = [f for f in files if "/translations/" not in f]
    docs = []
    for path in files:
        raw = gzip.open(path).read().decode("utf-8", "replace")
        keep = []
        for l in raw.split("\n"):
            s = l.strip()
            if s.startswith(".. ") or "SPDX-License" in s or (s and re.fullmatch(r"[=\-~^*#+`'\".:_]{3,}", s)):
                continue
            keep.append(l.rstrip().replace("\t", "        "))
        t = re.sub(r"\n{3,}", "\n\n", "\n".join(keep)).strip()
        # documents of at most ~8 KB so held-out sampling covers many files
        for part in re.split(r"\n\n(?=[A-Z])", t):
            if len(part) > 80:
                docs.append(part)
    return docs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/nanok3-corpus")
    args = ap.parse_args()
    os.makedirs(MODEL_DIR, exist_ok=True)
    os.makedirs(DATA_DIR, exist_ok=True)
    root, versions = fetch(args.work)
    log("packages:", versions)
    sources = [
        ("kjv", "King James Bible (bible-kjv-text, via bible-kjv's reader)", kjv_docs(root)),
        ("fortunes", "fortune cookies (fortunes, fortunes-min; ascii-art left out)", fortune_docs(root)),
        ("gcide", "GCIDE dictionary (dict-gcide), source markers and pronunciations removed", gcide_docs(root)),
        ("jargon", "The Jargon File (jargon-text)", jargon_docs(root)),
        ("kernel", "Linux kernel documentation (linux-doc-6.1), reST directives dropped", kernel_docs(root)),
    ]
    train_docs, held = [], {}
    meta = {"packages": versions, "n_ranks": N_RANKS, "heldout_every": HELDOUT_EVERY, "sources": {}}
    for key, desc, docs in sources:
        tr = [d for i, d in enumerate(docs) if i % HELDOUT_EVERY != HELDOUT_EVERY // 2]
        he = [d for i, d in enumerate(docs) if i % HELDOUT_EVERY == HELDOUT_EVERY // 2]
        train_docs += [(key, d) for d in tr]
        held[key] = he
        meta["sources"][key] = {"what": desc, "docs": len(docs),
                                "train_bytes": sum(len(d.encode()) for d in tr),
                                "heldout_bytes": sum(len(d.encode()) for d in he)}
        log(f"{key}: {len(docs)} docs, {meta['sources'][key]['train_bytes'] / 1e6:.2f} MB train")
    # training order: a fixed shuffle of the documents (seeded), so batches mix sources
    rng = np.random.default_rng(1234)
    order = rng.permutation(len(train_docs))
    train_docs = [train_docs[i] for i in order]

    log("counting pre-tokens")
    counts = bpe.count_pretokens(d for _, d in train_docs)
    counts.update(bpe.count_pretokens(["\n\n"] * 1000))
    log(f"{len(counts)} distinct pre-tokens; learning {N_RANKS} ranks")
    vocab = bpe.train(counts, N_RANKS, log=log)
    bpe.write_tokenizer(vocab, MODEL_DIR)
    tok = bpe.Tokenizer(MODEL_DIR)

    def encode_docs(docs):
        ids = []
        for d in docs:
            ids.extend(tok.encode(d))
            ids.extend(tok.encode("\n\n"))
        return ids

    log("tokenizing train")
    per_src = {}
    train_ids = []
    for key, d in train_docs:
        e = tok.encode(d + "\n\n")
        train_ids.extend(e)
        per_src[key] = per_src.get(key, 0) + len(e)
    # held-out: interleave sources document by document
    inter = []
    iters = {k: iter(v) for k, v in held.items()}
    while iters:
        for k in list(iters):
            d = next(iters[k], None)
            if d is None:
                del iters[k]
            else:
                inter.append((k, d))
    held_ids = encode_docs(d for _, d in inter)
    np.array(train_ids, dtype=np.uint16).tofile(os.path.join(DATA_DIR, "train.bin"))
    np.array(held_ids, dtype=np.uint16).tofile(os.path.join(DATA_DIR, "heldout.bin"))
    # the shipped sample: whole held-out documents from the start of the interleaved list
    sample, size = [], 0
    for _, d in inter:
        if size + len(d.encode()) > HELDOUT_TXT_BYTES and sample:
            continue
        sample.append(d)
        size += len(d.encode()) + 2
        if size > HELDOUT_TXT_BYTES * 0.95:
            break
    with open(os.path.join(MODEL_DIR, "heldout.txt"), "w") as f:
        f.write("\n\n".join(sample) + "\n")
    for k in per_src:
        meta["sources"][k]["train_tokens"] = per_src[k]
    meta["train_tokens"] = len(train_ids)
    meta["heldout_tokens"] = len(held_ids)
    meta["train_bytes"] = sum(len(d.encode()) + 2 for _, d in train_docs)
    meta["heldout_txt_bytes"] = os.path.getsize(os.path.join(MODEL_DIR, "heldout.txt"))
    meta["sha256"] = {n: hashlib.sha256(open(os.path.join(DATA_DIR, n), "rb").read()).hexdigest()
                      for n in ("train.bin", "heldout.bin")}
    with open(os.path.join(DATA_DIR, "corpus.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    log(f"train {len(train_ids)} tokens ({meta['train_bytes'] / len(train_ids):.2f} bytes/token), "
        f"held-out {len(held_ids)} tokens")


if __name__ == "__main__":
    main()
