#!/usr/bin/env python3
# bench/sampler/fold.py SAMPLES BINARY [FILTER]: the samples of sampler.cpp as a flat (self) and an
# inclusive profile by function; FILTER keeps the samples with a frame whose name contains it
# (e.g. Session::step: the decode steps). Symbols of BINARY by addr2line, other modules by name.
import sys, subprocess, collections, bisect, os
path, binpath = sys.argv[1], sys.argv[2]
flt = sys.argv[3] if len(sys.argv) > 3 else ''
samples, maps = [], []
for line in open(path):
    if line.startswith('S '):
        p = line.split(); samples.append((int(p[1]), [int(x, 16) for x in p[3:]]))
    elif line.startswith('M '):
        p = line[2:].split()
        lo, hi = (int(x, 16) for x in p[0].split('-'))
        maps.append((lo, hi, int(p[2], 16), p[5] if len(p) > 5 else '?'))
maps.sort()
los = [m[0] for m in maps]
bname = os.path.basename(binpath)
def where(a):
    i = bisect.bisect_right(los, a) - 1
    if i >= 0 and maps[i][0] <= a < maps[i][1]:
        lo, hi, off, name = maps[i]
        return name, a - lo + off
    return '?', a
# collect binary offsets
addrs = set()
for _, fr in samples:
    for a in fr:
        n, o = where(a)
        if os.path.basename(n) == bname: addrs.add(o)
addrs = sorted(addrs)
names = {}
if addrs:
    out = subprocess.run(['addr2line', '-f', '-C', '-e', binpath] + ['%x' % (a - 1) for a in addrs], capture_output=True, text=True).stdout.split('\n')
    for i, a in enumerate(addrs): names[a] = out[2 * i][:110]
def fname(a):
    n, o = where(a)
    if os.path.basename(n) == bname: return names.get(o, '?')
    return os.path.basename(n)
sym = [(t, [fname(a) for a in fr[2:]]) for t, fr in samples]  # drop handler + trampoline frames
if flt: sym = [s for s in sym if any(flt in f for f in s[1])]
N = len(sym); print('samples', N, 'of', len(samples))
self_c, incl = collections.Counter(), collections.Counter()
for _, fr in sym:
    if not fr: continue
    self_c[fr[0]] += 1
    for f in set(fr): incl[f] += 1
print('--- self'); [print('%6.1f%%  %s' % (100 * c / N, f)) for f, c in self_c.most_common(30)]
print('--- inclusive'); [print('%6.1f%%  %s' % (100 * c / N, f)) for f, c in incl.most_common(45)]
