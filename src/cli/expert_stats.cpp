#include "cli/expert_stats.h"

#include <nlohmann/json.hpp>

#include "hub/http_experts.h"
#include "kernels/device.h"

namespace sluice::cli {

std::string expert_stats_json(const Model& model, int tokens) {
  nlohmann::json j;
  j["tokens"] = tokens;
  j["device"] = describe_backend(model.backend() ? *model.backend() : cpu_backend());
  if (model.backend()) {
    const DeviceReport d = device_report(*model.backend(), false);
    if (d.gpu) j["vram"] = {{"total_bytes", d.vram_total}, {"used_bytes", d.vram_used}, {"peak_bytes", d.vram_peak},
                            {"cpu_spill_calls", d.cpu_spill_calls}, {"split_calls", d.split_calls}, {"split_share", d.split_share}, {"mla_calls", d.mla_calls}, {"dsa_calls", d.dsa_calls}};
  }
  StreamStats s;
  if (!model.io().experts || !stream_stats(*model.io().experts, &s)) {
    j["expert_source"] = "local";
    return j.dump();
  }
  j["expert_source"] = "http";
  j["spans_requested"] = s.spans_requested;
  j["spans_fetched"] = s.spans_fetched;
  j["cache_hits"] = s.cache_hits;
  j["local_reads"] = s.local_reads;
  j["network_bytes"] = s.network_bytes;
  j["network_bytes_per_token"] = tokens > 0 ? double(s.network_bytes) / tokens : 0.0;
  j["requests"] = s.requests;
  j["retries"] = s.retries;
  j["cache_corrupt"] = s.cache_corrupt;
  j["cache_evictions"] = s.cache_evictions;
  j["cache_store_errors"] = s.cache_store_errors;
  j["cache_bytes"] = s.cache_bytes;
  j["cache_entries"] = s.cache_entries;
  return j.dump();
}

}  // namespace sluice::cli
