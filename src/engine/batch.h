// engine/batch.h — several generations decoded together, one pass per step.
//
// A Batch holds `slots` sessions. add() starts a generation in a free one (the
// session whose tokens are the longest prefix of the prompt, so a chat's next
// turn resumes its own live state; the shared PrefixCache does the rest). Each
// step(): generations whose opt.cancelled says so leave; then ONE pass
// (Session::feed_together, k3/model.h's forward_rows) feeds the rows of every
// decoding generation (its pending token and its drafts: drafting and
// batching combine, sum(1 + drafts) rows) together with a prompt chunk of each
// joining one (oldest first, at most one chunk's worth of rows in all, decode
// rows included: a long prompt delays the others by one chunk's compute per
// step, not by its whole prefill, and a joining prompt costs no pass of its
// own: it shares the decode pass's spine and expert reads). A joining
// generation samples its first token from its prompt's last row and decodes
// from the next step. A generation that ends leaves at once (its session is
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

// What one of Batch's passes holds, for the memory plan: at most the larger
// of a prompt chunk and every sequence's rows (its token and up to
// draft_max drafts, plus one), and logits for every decode row and one per
// joining prompt: sequences x (1 + draft_max) at most.
void plan_batch_passes(ModelOptions& mo, int sequences, int draft_max, int prefill_chunk);

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
    uint64_t passes = 0;  // passes with decode rows (those with only prompt chunks not counted)
    uint64_t rows = 0;    // decode rows of those passes
    uint64_t fused_passes = 0, prompt_rows = 0;  // of those, passes a joining prompt's chunk rode in, and its rows
    uint64_t prompt_passes = 0;  // passes of prompt chunks only (nothing was decoding)
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
  std::vector<float> logits_;  // the latest pass's: [prompt chunks' last rows + decode rows][V]
};

}  // namespace sluice
