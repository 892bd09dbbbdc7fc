// engine/batch.h — several generations decoded together, one pass per step.
//
// A Batch holds `slots` sessions. add() starts a generation in a free one (the
// session whose tokens are the longest prefix of the prompt, so a chat's next
// turn resumes its own live state; the shared PrefixCache does the rest). Each
// step(): generations whose opt.cancelled says so leave; the prefilling ones
// feed a prompt chunk each in one pass (oldest first, at most one chunk's
// worth of rows in all: a long prompt delays the others by one chunk per step,
// not by its whole prefill; short prompts joining together share a pass); then
// ONE pass (Session::feed_together, k3/model.h's forward_rows) feeds the rows
// of every decoding generation: its pending token and its drafts. Drafting and batching combine: a pass has
// sum(1 + drafts) rows. A generation that ends leaves at once (its session is
// free before the next step) and on_done gets its result.
//
// Each generation reports exactly the tokens it reports alone (forward_rows is
// bitwise per row; sampling, verification and stops are per generation:
// engine/generate.h's Generation). A pass that throws ends every generation in
// it with the error (their sessions are reset). Not thread-safe: one thread
// drives a Batch and the model.
#pragma once
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "engine/generate.h"

namespace sluice {

class Batch {
 public:
  // error: null, or what ended the generation (the result is then partial).
  using OnDone = std::function<void(const GenerateResult&, std::exception_ptr error)>;

  Batch(Model& m, int slots, PrefixCache* cache);

  int slots() const { return int(slots_.size()); }
  int active() const;      // generations in the batch, prefilling or decoding
  int prefilling() const;  // of which still prefilling
  bool full() const { return active() == slots(); }

  // Starts a generation (the prompt and options are copied); throws when full.
  void add(std::span<const int> prompt, const GenerateOptions& opt, OnToken on_token, OnDone on_done);
  // One step (see above); nothing when empty.
  void step();

  struct Stats {
    uint64_t passes = 0;  // decode passes (prefill chunks not counted)
    uint64_t rows = 0;    // rows of those passes
    uint64_t tokens = 0;  // tokens those passes reported
    uint64_t draft_proposed = 0, draft_accepted = 0;
    int last_rows = 0;      // rows of the latest pass
    int last_sequences = 0;  // sequences in it
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Slot {
    std::unique_ptr<Session> session;
    std::unique_ptr<Generation> gen;  // null: free
    OnDone on_done;
    uint64_t order = 0;  // when it was added
  };
  void retire(Slot& s, std::exception_ptr error = nullptr);

  PrefixCache* cache_;
  std::vector<Slot> slots_;
  uint64_t added_ = 0;
  Stats stats_;
  std::vector<float> logits_, prefill_logits_;  // apart: a joining one's first token is sampled from the latter
};

}  // namespace sluice
