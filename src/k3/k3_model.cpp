#include "k3/k3_model.h"

#include <vector>

#include "base/error.h"
#include "k3/step_mix.h"

namespace sluice {
namespace {

struct K3UndoData final : UndoData {
  ChunkUndo u;
  int rows() const override { return u.T; }
  void clear() override { u.T = 0; }
};

ChunkUndo& k3_undo(ModelUndo& undo) {
  if (!undo.data) undo.data = std::make_unique<K3UndoData>();
  return static_cast<K3UndoData&>(*undo.data).u;
}

class K3 final : public Model {
 public:
  explicit K3(std::unique_ptr<K3Model> m) : m_(std::move(m)) {}

  const Checkpoint& checkpoint() const override { return m_->ck; }
  const MemoryPlan& plan() const override { return m_->plan; }
  const Backend* backend() const override { return m_->backend; }

  ModelState new_state() const override {
    return ModelState(std::make_unique<K3StateData>(SequenceState::create(m_->config())));
  }
  void forward(ModelState& state, std::span<const int> tokens, Logits which, std::vector<float>* logits,
               ForwardTrace* trace, ModelUndo* undo) override {
    sluice::forward(*m_, k3_state(state), tokens, which, logits, trace, undo ? &k3_undo(*undo) : nullptr);
  }
  void forward_rows(std::span<const ModelRows> seqs, Logits which, std::vector<float>* logits,
                    ForwardTrace* trace) override {
    std::vector<SequenceRows> rows;
    rows.reserve(seqs.size());
    for (const ModelRows& q : seqs)
      rows.push_back({&k3_state(*q.state), q.tokens, q.undo ? &k3_undo(*q.undo) : nullptr, q.last_only});
    sluice::forward_rows(*m_, rows, which, logits, trace);
  }
  void rollback(ModelState& state, ModelUndo& undo, int keep) override {
    sluice::rollback(*m_, k3_state(state), k3_undo(undo), keep);
  }

  ModelIo io() const override {
    return {m_->spine.get(), m_->experts.get(), &m_->prefetcher, m_->globals_bytes_read, m_->queue_depth,
            m_->reader_depth};
  }
  StepMix step_mix() const override { return sluice::step_mix(m_->config(), *m_->spine, m_->plan.resident_pieces); }
  StepMix token_boundary_mix() const override {
    return sluice::token_boundary_mix(m_->config(), *m_->spine, m_->plan.resident_pieces);
  }

  K3Model& parts() { return *m_; }

 private:
  std::unique_ptr<K3Model> m_;
};

}  // namespace

std::unique_ptr<Model> wrap_k3(std::unique_ptr<K3Model> m) { return std::make_unique<K3>(std::move(m)); }

std::unique_ptr<Model> open_k3(const std::string& dir, const ModelOptions& opt) {
  return wrap_k3(open_k3_model(dir, opt));
}

K3Model& k3_parts(Model& m) {
  K3* k = dynamic_cast<K3*>(&m);
  if (!k) fail("model", "not a K3 model");
  return k->parts();
}

SequenceState& k3_state(ModelState& s) {
  auto* d = dynamic_cast<K3StateData*>(s.data());
  if (!d) fail("model", "not a K3 sequence state");
  return d->s;
}

const SequenceState& k3_state(const ModelState& s) { return k3_state(const_cast<ModelState&>(s)); }

}  // namespace sluice
