// model/state.h — one sequence's state and one chunk's undo record, opaque to
// the engine: each architecture keeps its own (k3/state.h for K3) behind them.
//
// A ModelState is a value, as the architecture's state is: copying it is a
// snapshot, assigning it back a rollback (bitwise the state that was copied).
// The model creates it (Model::new_state); a ModelUndo starts empty and the
// model fills it on a forward pass that asks for one.
#pragma once
#include <cstdint>
#include <memory>

namespace sluice {

// What an architecture's sequence state offers the engine.
class StateData {
 public:
  virtual ~StateData() = default;
  virtual std::unique_ptr<StateData> clone() const = 0;
  // Becomes a copy of `o` (the same architecture's), reusing its own buffers.
  virtual void assign(const StateData& o) = 0;
  virtual int64_t pos() const = 0;     // tokens consumed so far
  virtual uint64_t bytes() const = 0;  // bytes held; grows with the context
  virtual void reset() = 0;            // back to no tokens
};

class ModelState {
 public:
  ModelState() = default;
  explicit ModelState(std::unique_ptr<StateData> d) : d_(std::move(d)) {}
  ModelState(const ModelState& o) : d_(o.d_ ? o.d_->clone() : nullptr) {}
  ModelState(ModelState&&) noexcept = default;
  ModelState& operator=(const ModelState& o);
  ModelState& operator=(ModelState&&) noexcept = default;

  int64_t pos() const { return d_ ? d_->pos() : 0; }
  uint64_t bytes() const { return d_ ? d_->bytes() : 0; }
  void reset() {
    if (d_) d_->reset();
  }
  // The architecture's state (its own code casts it back).
  StateData* data() { return d_.get(); }
  const StateData* data() const { return d_.get(); }

 private:
  std::unique_ptr<StateData> d_;
};

// An architecture's undo record of one chunk.
class UndoData {
 public:
  virtual ~UndoData() = default;
  virtual int rows() const = 0;  // the recorded chunk's length; 0: nothing to undo
  virtual void clear() = 0;      // nothing to undo (its buffers kept for the next chunk)
};

struct ModelUndo {
  std::unique_ptr<UndoData> data;  // empty until a forward pass fills it
  int rows() const { return data ? data->rows() : 0; }
  void clear() {
    if (data) data->clear();
  }
};

}  // namespace sluice
