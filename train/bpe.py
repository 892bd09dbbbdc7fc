"""Byte-level BPE in tiktoken format with K3's pre-tokenizer (spec §6).

  * train(counts, n_ranks): learn merges from a {pre-token bytes: count} table;
  * Tokenizer: load tiktoken.model + tokenizer_config.json, encode (rank BPE: repeatedly
    merge the adjacent pair whose concatenation has the lowest rank, leftmost on ties),
    decode;
  * write_tokenizer: tiktoken.model (base64 bytes + rank, ranks contiguous, all 256 bytes
    present) and tokenizer_config.json with K3's reserved special ids at the top.

Needs the `regex` module (Debian python3-regex) for \\p classes and class intersection.
"""
import base64
import heapq
import json
from collections import Counter, defaultdict

import regex

PATTERN = "|".join([
    r"[\p{Han}]+",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])
SPLIT = regex.compile(PATTERN, flags=regex.V1)

# K3 reserves 256 ids above the BPE ranks; these are the named ones (offset: spelling).
SPECIALS = {
    0: "[BOS]", 1: "[EOS]", 2: "<|end_of_msg|>", 3: "<|open|>", 4: "<|close|>", 5: "<|sep|>",
    6: "[start_header_id]", 7: "[end_header_id]", 9: "[EOT]",
    18: "<|media_begin|>", 19: "<|media_content|>", 20: "<|media_end|>", 21: "<|media_pad|>",
    65: "<osagent_mode>", 254: "[UNK]", 255: "[PAD]",
}
N_RESERVED = 256


def byte_order():
    """tiktoken's printable-first order of the 256 single bytes."""
    first = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    return first + [b for b in range(256) if b not in set(first)]


def pretokenize(text):
    return SPLIT.findall(text)


# ---------------------------------------------------------------- training


def train(counts, n_ranks, log=None):
    """counts: {bytes: int}. Returns the list of token byte strings in rank order
    (256 single bytes first, then one new token per merge, duplicates skipped).
    Merge choice: highest pair count, ties by the smaller (left bytes, right bytes)."""
    vocab = [bytes([b]) for b in byte_order()]
    seen = set(vocab)
    words = []  # list of [symbols list, count]
    for w, c in counts.items():
        words.append([[w[i:i + 1] for i in range(len(w))], c])
    pair_count = defaultdict(int)
    where = defaultdict(set)
    for wi, (sy, c) in enumerate(words):
        for a, b in zip(sy, sy[1:]):
            pair_count[(a, b)] += c
            where[(a, b)].add(wi)

    # max-heap keyed by (-count, a, b); entries are checked against pair_count when popped
    heap = [(-c, p[0], p[1]) for p, c in pair_count.items()]
    heapq.heapify(heap)
    while len(vocab) < n_ranks and heap:
        negc, a, b = heapq.heappop(heap)
        cur = pair_count.get((a, b), 0)
        if cur <= 0:
            continue
        if -negc != cur:
            heapq.heappush(heap, (-cur, a, b))
            continue
        new = a + b
        if new not in seen:
            seen.add(new)
            vocab.append(new)
            if log and len(vocab) % 1000 == 0:
                log(f"bpe: {len(vocab)} ranks, last {new!r} count {cur}")
        changed = defaultdict(int)
        for wi in list(where.pop((a, b), ())):
            sy, c = words[wi]
            i = 0
            out = []
            merged = False
            while i < len(sy):
                if i + 1 < len(sy) and sy[i] == a and sy[i + 1] == b:
                    out.append(new)
                    i += 2
                    merged = True
                else:
                    out.append(sy[i])
                    i += 1
            if not merged:
                continue
            for p, q in zip(sy, sy[1:]):
                changed[(p, q)] -= c
            for p, q in zip(out, out[1:]):
                changed[(p, q)] += c
                where[(p, q)].add(wi)
            words[wi][0] = out
        pair_count.pop((a, b), None)
        for p, d in changed.items():
            if p == (a, b) or d == 0:
                continue
            pair_count[p] += d
            if d > 0:
                heapq.heappush(heap, (-pair_count[p], p[0], p[1]))
            elif pair_count[p] <= 0:
                pair_count.pop(p, None)
    return vocab


def count_pretokens(texts):
    c = Counter()
    for t in texts:
        c.update(s.encode("utf-8") for s in pretokenize(t))
    return c


# ---------------------------------------------------------------- files


def write_tokenizer(vocab, out_dir):
    n = len(vocab)
    with open(f"{out_dir}/tiktoken.model", "w") as f:
        for r, tok in enumerate(vocab):
            f.write(f"{base64.b64encode(tok).decode()} {r}\n")
    dec = {}
    for off in range(N_RESERVED):
        dec[str(n + off)] = {
            "content": SPECIALS.get(off, f"<|reserved_token_{n + off}|>"),
            "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": True,
        }
    conf = {
        "added_tokens_decoder": dec,
        "additional_special_tokens": [SPECIALS[o] for o in (2, 3, 4, 5, 6, 7, 9, 18, 19, 20, 21)],
        "bos_token": "[BOS]",
        "clean_up_tokenization_spaces": False,
        "eos_token": "[EOS]",
        "model_max_length": 1048576,
        "num_reserved_special_tokens": N_RESERVED,
        "pad_token": "[PAD]",
        "tokenizer_class": "TikTokenTokenizer",
        "unk_token": "[UNK]",
    }
    with open(f"{out_dir}/tokenizer_config.json", "w") as f:
        json.dump(conf, f, indent=2)
        f.write("\n")


class Tokenizer:
    def __init__(self, model_dir):
        self.ranks = {}
        self.id_bytes = []
        with open(f"{model_dir}/tiktoken.model") as f:
            for line in f:
                if not line.strip():
                    continue
                b64, r = line.split()
                tok = base64.b64decode(b64)
                if int(r) != len(self.id_bytes):
                    raise ValueError(f"{model_dir}/tiktoken.model: ranks not contiguous at {r}")
                self.ranks[tok] = int(r)
                self.id_bytes.append(tok)
        with open(f"{model_dir}/tokenizer_config.json") as f:
            conf = json.load(f)
        self.specials = {int(k): v["content"] for k, v in conf["added_tokens_decoder"].items()}
        self.special_ids = {v: k for k, v in self.specials.items()}
        self.cache = {}

    def bpe(self, piece):
        if piece in self.ranks:
            return [self.ranks[piece]]
        parts = [piece[i:i + 1] for i in range(len(piece))]
        while len(parts) > 1:
            best, bi = None, -1
            for i in range(len(parts) - 1):
                r = self.ranks.get(parts[i] + parts[i + 1])
                if r is not None and (best is None or r < best):
                    best, bi = r, i
            if best is None:
                break
            parts[bi:bi + 2] = [parts[bi] + parts[bi + 1]]
        return [self.ranks[p] for p in parts]

    def encode(self, text, parse_special=False):
        out = []
        segs = [text]
        if parse_special:
            pat = "(" + "|".join(regex.escape(s) for s in sorted(self.special_ids, key=len, reverse=True)) + ")"
            segs = regex.split(pat, text)
        for seg in segs:
            if parse_special and seg in self.special_ids:
                out.append(self.special_ids[seg])
                continue
            for p in pretokenize(seg):
                b = p.encode("utf-8")
                ids = self.cache.get(b)
                if ids is None:
                    ids = self.bpe(b)
                    if len(self.cache) < 2_000_000:
                        self.cache[b] = ids
                out.extend(ids)
        return out

    def decode(self, ids):
        bs = b"".join(self.id_bytes[i] if i < len(self.id_bytes) else self.specials.get(i, "").encode()
                      for i in ids)
        return bs.decode("utf-8", errors="replace")
