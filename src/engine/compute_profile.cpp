#include "engine/compute_profile.h"

#include <cmath>
#include <ctime>

#include <nlohmann/json.hpp>

#include "base/cache_file.h"
#include "base/error.h"
#include "base/stats.h"

namespace sluice {

std::string compute_profile_path() { return cache_file_path("SLUICE_COMPUTE_PROFILE", "compute.json"); }

namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

namespace {

std::optional<ComputeProfile> parse_run(const nlohmann::json& j) {
  auto num = [](const nlohmann::json& o, const char* k) -> std::optional<double> {
    const auto it = o.find(k);
    if (it == o.end() || !it->is_number()) return std::nullopt;
    const double v = it->get<double>();
    return std::isfinite(v) && v >= 0 ? std::optional<double>(v) : std::nullopt;
  };
  if (!j.is_object()) return std::nullopt;
  const auto s = num(j, "compute_s_per_token"), t = num(j, "threads");
  // {bf16, int8, mxfp4, decoded} at key k, when all there and not all zero.
  auto mix = [&](const char* k) -> std::optional<StepMix> {
    const auto b = j.find(k);
    if (b == j.end() || !b->is_object()) return std::nullopt;
    const auto bf16 = num(*b, "bf16"), int8 = num(*b, "int8"), mxfp4 = num(*b, "mxfp4"), dec = num(*b, "decoded");
    if (!bf16 || !int8 || !mxfp4 || !dec || *bf16 + *int8 + *mxfp4 + *dec <= 0) return std::nullopt;
    StepMix m;
    m.bf16 = *bf16, m.int8 = *int8, m.mxfp4 = *mxfp4, m.decoded = *dec;
    return m;
  };
  const auto bytes = mix("bytes");
  if (!s || !t || *s <= 0 || *t < 1 || !bytes) return std::nullopt;
  ComputeProfile p;
  p.compute_s = *s;
  p.threads = int(*t);
  if (const auto k = j.find("kernels"); k != j.end() && k->is_string()) p.kernels = k->get<std::string>();
  p.mix = *bytes;
  // The token boundary, when this run measured one (older files have none).
  const auto boundary = num(j, "boundary_s_per_token");
  const auto boundary_bytes = mix("boundary_bytes");
  if (boundary && *boundary > 0 && boundary_bytes) {
    p.boundary_s = std::min(*boundary, p.compute_s);
    p.boundary_mix = *boundary_bytes;
  }
  if (j.contains("model") && j["model"].is_string()) p.model = j["model"];
  if (j.contains("when") && j["when"].is_string()) p.when = j["when"];
  p.ram_budget = uint64_t(num(j, "ram_budget").value_or(0));
  p.steps = int(num(j, "steps").value_or(0));
  return p;
}

}  // namespace

void save_compute_profile(const std::string& path, const ComputeProfile& p) {
  if (path.empty()) fail("bench", "no place to save the compute profile (set SLUICE_COMPUTE_PROFILE or HOME)");
  if (!(p.compute_s > 0)) fail(path, "no measured compute to save");
  auto bytes = [](const StepMix& m) {
    return nlohmann::json{{"bf16", m.bf16}, {"int8", m.int8}, {"mxfp4", m.mxfp4}, {"decoded", m.decoded}};
  };
  nlohmann::json run = {{"model", p.model},       {"when", p.when.empty() ? utc_now() : p.when},
                        {"ram_budget", p.ram_budget}, {"threads", p.threads}, {"kernels", p.kernels},
                        {"steps", p.steps},       {"compute_s_per_token", p.compute_s},
                        {"bytes", bytes(p.mix)}};
  if (p.boundary_s > 0) run["boundary_s_per_token"] = p.boundary_s, run["boundary_bytes"] = bytes(p.boundary_mix);
  nlohmann::json j = read_cache_json(path);
  nlohmann::json runs = nlohmann::json::array();
  if (j.contains("runs") && j["runs"].is_array())
    for (const nlohmann::json& r : j["runs"])
      if (parse_run(r)) runs.push_back(r);
  runs.push_back(run);
  while (runs.size() > size_t(kComputeRunsKept)) runs.erase(runs.begin());
  write_cache_json(path, {{"runs", runs}});
}

std::vector<ComputeProfile> load_compute_profile(const std::string& path) {
  const nlohmann::json j = read_cache_json(path);
  std::vector<ComputeProfile> out;
  if (j.contains("runs") && j["runs"].is_array())
    for (const nlohmann::json& r : j["runs"])
      if (auto p = parse_run(r)) out.push_back(*p);
  return out;
}

double kernel_seconds(const StepMix& m, const kernels::KernelRates& r, double scale) {
  auto at = [&](double bytes, double gbps) { return bytes > 0 ? bytes / (gbps * scale * 1e9) : 0.0; };
  return at(m.bf16, r.bf16_gbps) + at(m.int8, r.int8_gbps) + at(m.mxfp4, r.mxfp4_gbps) + at(m.decoded, r.decode_gbps);
}

double scaled_compute_s(const ComputeProfile& p, const StepMix& m, const kernels::KernelRates& rates) {
  return p.compute_s * kernel_seconds(m, rates) / kernel_seconds(p.mix, rates);
}

}  // namespace sluice

namespace sluice {

bool run_applies(const ComputeProfile& p, int threads, const kernels::KernelRates& rates) {
  return p.threads == threads && (rates.kernels.empty() || p.kernels == rates.kernels);
}

namespace {

// The median of scaled(p) over the runs that apply and measured what `scaled`
// needs (it returns a negative number for the others); *used: how many.
template <class Scaled>
double median_of_runs(const std::vector<ComputeProfile>& runs, int threads, const kernels::KernelRates& rates,
                      int* used, const Scaled& scaled) {
  std::vector<double> v;
  for (const ComputeProfile& p : runs)
    if (run_applies(p, threads, rates))
      if (const double s = scaled(p); s >= 0) v.push_back(s);
  if (used) *used = int(v.size());
  return median(v);
}

}  // namespace

double saved_compute_s(const std::vector<ComputeProfile>& runs, int threads, const StepMix& m,
                       const kernels::KernelRates& rates, int* used) {
  return median_of_runs(runs, threads, rates, used,
                        [&](const ComputeProfile& p) { return scaled_compute_s(p, m, rates); });
}

double saved_boundary_s(const std::vector<ComputeProfile>& runs, int threads, const StepMix& boundary,
                        const kernels::KernelRates& rates, int* used) {
  return median_of_runs(runs, threads, rates, used, [&](const ComputeProfile& p) {
    if (!(p.boundary_s > 0)) return -1.0;
    return p.boundary_s * kernel_seconds(boundary, rates) / kernel_seconds(p.boundary_mix, rates);
  });
}

}  // namespace sluice
