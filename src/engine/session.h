// engine/session.h — one conversation with a model: its tokens and its state.
//
// A Session owns a sequence state (model/state.h) and the token history that produced it.
// prefill() runs a whole prompt chunk at once, step() one token; both return
// the logits of the last position. snapshot()/restore() make a cheap rollback
// point (the state is a value); verify()/keep_verified() cut back a chunk
// without copying the state. Greedy generation lives here too; sampling
// and stop rules are in engine/sampler.h.
#pragma once
#include <functional>
#include <span>
#include <vector>

#include "model/model.h"

namespace sluice {

class Session {
 public:
  explicit Session(Model& model);

  // Feeds tokens as one chunk; returns the logits [V] of the last one.
  const std::vector<float>& prefill(std::span<const int> tokens);
  // Feeds tokens as one chunk; returns the logits [T][V] of every position.
  const std::vector<float>& prefill_all(std::span<const int> tokens);
  // Feeds one token; returns its logits [V].
  const std::vector<float>& step(int token);
  // Feeds tokens as one chunk that keep_verified() can cut back (speculative
  // verification); returns the logits [T][V] of every position.
  const std::vector<float>& verify(std::span<const int> tokens);
  // Keeps the first `keep` tokens of the last verify() chunk: the state is then
  // bitwise what feeding only them leaves (model/model.h: rollback). Call once, before any other feed.
  void keep_verified(int keep);

  // Feeds tokens in chunks of at most `chunk` (bitwise the same as one chunk:
  // see model/model.h), calling progress(done, total) before the first chunk and
  // after each. When progress returns false the feed stops there and this
  // returns false; the session then holds the chunks already fed. On true,
  // logits() holds the last position's logits [V].
  using PrefillProgress = std::function<bool(size_t done, size_t total)>;
  bool prefill_chunked(std::span<const int> tokens, int chunk, const PrefillProgress& progress);
  const std::vector<float>& logits() const { return logits_; }

  // One pass over several sessions (engine/batch.h: model/model.h's forward_rows),
  // each bitwise as if fed alone. Logits::All: session i feeds chunks[i] like
  // verify() (a chunk of one like step()) and `logits` gets [all rows][V] in
  // order; Logits::Last: like prefill(), `logits` gets [sessions][V]. The
  // first `prompt_chunks` sessions feed like prefill() either way (a prompt
  // chunk riding in a pass of decode rows) and give only their last row.
  static void feed_together(std::span<Session* const> sessions, std::span<const std::vector<int>> chunks,
                            Logits which, std::vector<float>& logits, size_t prompt_chunks = 0);

  void reset();
  const std::vector<int>& tokens() const { return tokens_; }
  const ModelState& state() const { return state_; }
  Model& model() { return model_; }

  struct Snapshot {
    ModelState state;
    std::vector<int> tokens;
  };
  Snapshot snapshot() const { return {state_, tokens_}; }
  void restore(const Snapshot& s);

 private:
  Model& model_;
  ModelState state_;
  std::vector<int> tokens_;
  std::vector<float> logits_;
  ModelUndo undo_;
};

int argmax(std::span<const float> logits);

// Greedy continuation of `prompt`: up to max_new tokens, stopping after any id in `stop`.
std::vector<int> generate_greedy(Session& s, std::span<const int> prompt, int max_new, std::span<const int> stop = {});

}  // namespace sluice
