// k3/k3_model.h — K3 (and K3.1 Pro, the same code with DSA layers) behind
// model/model.h: the opaque state and undo record hold K3's (k3/state.h),
// and the forward pass, rollback and statistics are k3/model.h's.
#pragma once
#include <memory>
#include <string>

#include "k3/model.h"
#include "model/model.h"

namespace sluice {

// K3's sequence state inside a ModelState.
struct K3StateData final : StateData {
  SequenceState s;
  explicit K3StateData(SequenceState st) : s(std::move(st)) {}
  std::unique_ptr<StateData> clone() const override { return std::make_unique<K3StateData>(s); }
  void assign(const StateData& o) override { s = static_cast<const K3StateData&>(o).s; }
  int64_t pos() const override { return s.pos; }
  uint64_t bytes() const override { return s.bytes(); }
  void reset() override { s.reset(); }
};

// Opens DIR as a K3 model (k3/model.h open_k3_model) behind the interface.
std::unique_ptr<Model> open_k3(const std::string& dir, const ModelOptions& opt);
std::unique_ptr<Model> wrap_k3(std::unique_ptr<K3Model> m);

// The K3 parts behind a model open_k3 opened, and a state it created (tests
// that look inside; a model of another architecture is an error).
K3Model& k3_parts(Model& m);
SequenceState& k3_state(ModelState& s);
const SequenceState& k3_state(const ModelState& s);

}  // namespace sluice
