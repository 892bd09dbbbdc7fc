// kernels/rate_probe.h — how fast this machine's kernels run, measured in a
// short probe: the compute floor of a decode step (`sluice plan`).
//
// A decode step multiplies every spine matrix (bf16, or int8 with an int8
// pack) and every routed expert it touches (MXFP4) by one vector, and decodes
// the lossless pieces it streams. Each rate is bytes of weights per second of wall time through the
// fast kernels on the kernel pool, cycling through copies of each matrix that
// together exceed four last-level caches (the weights come from RAM, as in a
// step: one matrix reused would partly stay in the cache).
#pragma once
#include <cstddef>
#include <string>

namespace sluice::kernels {

struct KernelRates {
  int threads = 1;           // the kernel pool's size during the probe
  std::string kernels;       // fast::isa_name of the kernels measured ("": not said)
  double bf16_gbps = 0;      // bf16 weight bytes through fast::matvec_bf16
  double mxfp4_gbps = 0;     // MXFP4 codes + scales through fast::matvec_mxfp4
  double decode_gbps = 0;    // lossless blocks decoded: bf16 output bytes (codec::decode, blocks on the pool)
  double int8_gbps = 0;      // int8 rows (codes + group scales) through fast::matvec_int8
  int rounds = 1;            // each rate is the median of this many interleaved rounds
  double spread = 1;         // the largest kernel's fastest round / its slowest
};

// Measures with `threads` kernel threads (<= 0: the pool's current size), for
// about `seconds` in all, in `rounds` rounds that each time every kernel in
// turn (each rate: the median round); restores the pool's size. With one thread the rates
// are per core: bytes per second of the thread's own CPU time, so other
// processes on a shared machine do not slow them; with more, bytes per second
// of wall time (what the pool achieves on this machine as it is now).
KernelRates measure_kernel_rates(int threads, double seconds, int rounds = 8);

// A working set of four last-level caches (256 MiB at least, 1 GiB at most):
// weights cycled through it are read from RAM, as a step reads them. A step
// reads gigabytes of distinct weights; one 64 MiB matrix read over and over
// partly stays in a 32 MiB L3 (its replacement is not LRU) and measured up to
// twice the rate a step's matvecs get, by how much the neighbours left cached
// (so did the GPU probe's 256 MiB on the H100 box: 92-134 GB/s in one sitting).
size_t bytes_beyond_cache();

// One thread copying 8 MiB blocks from RAM (a working set beyond the caches)
// into one small destination, bytes per second of wall time for about
// `seconds`: the rate at which an upload from pageable memory can fill a GPU
// entry's pinned staging (the CUDA entry copies on the calling thread).
double measure_copy_gbps(double seconds);

}  // namespace sluice::kernels
