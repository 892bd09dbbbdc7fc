#!/usr/bin/env python3
"""Cross-checks train/bpe.py's encoder against the tiktoken package (where it is installed,
e.g. the device machine): same ids for heldout.txt and a few odd strings."""
import base64
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    import tiktoken
    md = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "nanok3")
    ranks = {}
    with open(os.path.join(md, "tiktoken.model")) as f:
        for line in f:
            if line.strip():
                b, r = line.split()
                ranks[base64.b64decode(b)] = int(r)
    enc = tiktoken.Encoding(name="nanok3", pat_str=bpe.PATTERN, mergeable_ranks=ranks, special_tokens={})
    ours = bpe.Tokenizer(md)
    texts = [open(os.path.join(md, "heldout.txt"), encoding="utf-8").read(),
             "  leading spaces and   runs of    spaces ", "It's DON'T we'll 12345 3.14 \n\n\n x",
             "naïve café — “quotes” 漢字 テスト", "\t\ttabs\r\nCRLF\n"]
    ok = True
    for t in texts:
        a, b = enc.encode_ordinary(t), ours.encode(t)
        same = a == b
        ok &= same
        print(f"{len(t):6d} chars, {len(a):6d} tokens: {'same' if same else 'DIFFERENT'}")
    print("tiktoken agrees" if ok else "tiktoken DISAGREES")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
