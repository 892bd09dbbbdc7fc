// kernels/split_share.h — the GPU's share of a split product's rows
// (--gpu-spill split: kernels/cuda/backend_cuda.cu), from products timed at a
// known share.
//
// Each side's time is a fixed cost per call (the GPU's: its activation's and
// DMA's start, the last block's GEMV, the result back; the CPU's: waking its
// pool) plus its bytes over its rate. The ratio of the two rates alone
// leaves the GPU's fixed cost out and gave it too few rows: on the H100 box
// the GPU finished ~15 % of a split step before the CPU (sitting H). The
// products a step makes differ in size (the head beside small projections),
// so a least-squares line through each side's times separates the two; the
// share is the one that has both sides finish together over the probed mix.
#pragma once
#include <algorithm>
#include <vector>

namespace sluice {

struct SplitTiming {
  double bytes = 0;  // the whole matrix's weight bytes
  double gpu_s = 0;  // the GPU's rows: DMA and GEMV (its events)
  double cpu_s = 0;  // the CPU's rows (host clock)
};

// A side's time against its bytes: seconds = fixed + bytes * per_byte.
struct SideFit {
  double fixed = 0, per_byte = 0;
  bool ok = false;  // the sizes told the two apart, and both came out non-negative
};

inline SideFit fit_side(const std::vector<SplitTiming>& calls, double share, bool gpu) {
  SideFit f;
  const double n = double(calls.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const SplitTiming& c : calls) {
    const double x = c.bytes * (gpu ? share : 1 - share), y = gpu ? c.gpu_s : c.cpu_s;
    sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  const double var = n * sxx - sx * sx;
  if (calls.size() < 2 || var <= 1e-12 * sxx * n) return f;  // one size: no line
  f.per_byte = (n * sxy - sx * sy) / var;
  f.fixed = (sy - f.per_byte * sx) / n;
  if (f.per_byte <= 0) return f;
  if (f.fixed < 0) {  // noise below zero: the line through the origin
    f.fixed = 0;
    f.per_byte = sxy / sxx;
  }
  f.ok = true;
  return f;
}

// The GPU's share (0.75 at most, 1/32 at least) that finishes both sides
// together over `calls`, timed at `share`; the ratio of the two sides' rates
// where a line does not fit. 0 when nothing was timed.
inline double balanced_split_share(const std::vector<SplitTiming>& calls, double share) {
  double bytes = 0, gpu_s = 0, cpu_s = 0;
  for (const SplitTiming& c : calls) bytes += c.bytes, gpu_s += c.gpu_s, cpu_s += c.cpu_s;
  if (bytes <= 0 || gpu_s <= 0 || cpu_s <= 0 || share <= 0 || share >= 1) return 0;
  const SideFit g = fit_side(calls, share, true), c = fit_side(calls, share, false);
  double s;
  if (g.ok && c.ok) {
    // n * g.fixed + s * B * g.per_byte = n * c.fixed + (1 - s) * B * c.per_byte
    const double n = double(calls.size());
    s = (bytes * c.per_byte + n * (c.fixed - g.fixed)) / (bytes * (g.per_byte + c.per_byte));
  } else {
    const double gr = share * bytes / gpu_s, cr = (1 - share) * bytes / cpu_s;  // bytes a second
    s = gr / (gr + cr);
  }
  return std::clamp(s, 1.0 / 32, 0.75);
}

}  // namespace sluice
