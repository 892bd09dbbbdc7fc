// engine/compute_profile.h — the engine's own decode compute, measured by
// `sluice bench --save-compute` and kept for `sluice plan`.
//
// A short kernel probe times one matrix shape; a decode step also runs
// attention, norms, the pool's hand-offs and hundreds of matrices of other
// shapes, and on a shared virtual machine the probe's rate swung 0.4-1.7x the
// engine's measured compute from one sitting to the next (docs/benchmarks.md,
// "`sluice plan` against `bench`"). A bench's median step less its waits for
// reads is the real op mix on this machine; the plan scales it to another
// model (or spine format) by the two steps' kernel bytes, weighted by the
// kernels' relative rates, so only the probe's ratios enter, not its level.
//
// The engine's compute itself moved 0.35-0.45 s per token between sittings
// minutes apart on that machine, so the file keeps the latest few runs and the
// plan takes their median.
//
// File: $SLUICE_COMPUTE_PROFILE, else $XDG_CACHE_HOME/sluice/compute.json, else
// ~/.cache/sluice/compute.json: {"runs": [{model, when, ram_budget, threads, kernels,
// steps, compute_s_per_token, bytes: {bf16, int8, mxfp4, decoded}, boundary_s_per_token, boundary_bytes:
// {bf16, int8, mxfp4, decoded}}, ...]} (the boundary fields and kernels optional),
// oldest first, at most kComputeRunsKept; written atomically.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>
#include <string>

#include "model/step_mix.h"
#include "kernels/rate_probe.h"

namespace sluice {

struct ComputeProfile {
  std::string model;        // the checkpoint bench ran
  std::string when;         // UTC, ISO 8601
  uint64_t ram_budget = 0;  // its budget (the spine was resident: saved only then)
  int threads = 1;          // kernel threads
  std::string kernels = "avx2";  // fast::isa_name of the kernels that ran (files before it: all AVX2)
  int steps = 0;            // decode steps the median is over
  double compute_s = 0;     // median step less its waits for reads (bench's decode_compute_s_per_token)
  double boundary_s = 0;    // of which the token boundary (bench's token_boundary_s_per_token; 0: not measured)
  StepMix mix;              // what that step computed (the byte fields only)
  StepMix boundary_mix;     // what its token boundary computed (k3/step_mix.h token_boundary_mix)
};

constexpr int kComputeRunsKept = 5;

std::string compute_profile_path();

// Appends `p` to the file's runs (dropping the oldest beyond kComputeRunsKept).
void save_compute_profile(const std::string& path, const ComputeProfile& p);

// The saved runs, oldest first; none when the file is missing or unreadable,
// and a run that is incomplete is left out (a hint, never a reason to fail).
std::vector<ComputeProfile> load_compute_profile(const std::string& path);

// Seconds the kernels take over `m`'s bytes at `rates` (GB/s each, times `scale`).
double kernel_seconds(const StepMix& m, const kernels::KernelRates& rates, double scale = 1);

// The measured compute scaled to the step `m`: p.compute_s times m's kernel
// seconds over p's, both at `rates`.
double scaled_compute_s(const ComputeProfile& p, const StepMix& m, const kernels::KernelRates& rates);

// Whether run `p` measured what a plan with `threads` kernel threads and these
// rates is for: as many threads, and the kernels `rates` was measured with (a
// run of the AVX2 kernels says nothing about the AVX-512 ones; rates that name
// no kernels match any run).
bool run_applies(const ComputeProfile& p, int threads, const kernels::KernelRates& rates);

// The median over the runs that apply (run_applies) of each one scaled to
// `m`; 0 when none does (*used: how many there were).
double saved_compute_s(const std::vector<ComputeProfile>& runs, int threads, const StepMix& m,
                       const kernels::KernelRates& rates, int* used = nullptr);

// The same for the token boundary: the median over the runs with `threads`
// that measured one of each run's boundary scaled to `boundary` (a
// token_boundary_mix); 0 when none did.
double saved_boundary_s(const std::vector<ComputeProfile>& runs, int threads, const StepMix& boundary,
                        const kernels::KernelRates& rates, int* used = nullptr);

}  // namespace sluice
