#include "engine/read_counter.h"

#include <utility>

namespace sluice {

namespace {

class CountingExperts : public ExpertSource {
 public:
  CountingExperts(std::unique_ptr<ExpertSource> inner, uint64_t span_bytes, ReadCounters* c)
      : inner_(std::move(inner)), span_bytes_(span_bytes), c_(c) {}

  void fetch(int layer, std::span<const int> experts,
             const std::function<void(size_t i, const uint8_t* span)>& use) override {
    c_->expert_fetches += experts.size();
    c_->expert_bytes += experts.size() * span_bytes_;
    inner_->fetch(layer, experts, use);
  }

 private:
  std::unique_ptr<ExpertSource> inner_;
  uint64_t span_bytes_;
  ReadCounters* c_;
};

}  // namespace

void count_expert_reads(Model& m, ReadCounters* c) {
  m.experts = std::make_unique<CountingExperts>(std::move(m.experts), m.config().expert_span_bytes(), c);
}

}  // namespace sluice
