#!/usr/bin/env python3
"""logits_close.py A B V — two float32 logits files of rows of V: the largest
|A - B| relative to max |A|, and how many rows share their argmax. Prints one
line; exits 0 when within 1e-3 with every argmax equal (the CUDA entry's
contract against the CPU), else 1. Used by the GPU scripts."""
import sys

import numpy as np

a = np.fromfile(sys.argv[1], '<f4')
b = np.fromfile(sys.argv[2], '<f4')
V = int(sys.argv[3])
if a.size != b.size or a.size % V or not np.isfinite(b).all():
    print("sizes or non-finite: FAIL")
    sys.exit(1)
a = a.reshape(-1, V)
b = b.reshape(-1, V)
d = float(np.abs(a - b).max()) / float(np.abs(a).max())
same = int((a.argmax(1) == b.argmax(1)).sum())
ok = d <= 1e-3 and same == a.shape[0]
print(f"relative {d:.2e}, argmax {same}/{a.shape[0]} {'ok' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
