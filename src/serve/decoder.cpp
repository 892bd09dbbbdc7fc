// serve/decoder.cpp — the decode thread (serve/server_impl.h): the one user of
// the model. It takes generations from its inbox into the Batch (up to
// --parallel N; the scheduler's tickets keep more from being handed over) and
// steps the batch: one pass over the rows of every decoding request and a
// prompt chunk of each joining one. Requests' threads wait on their Running.
#include "serve/server_impl.h"

namespace sluice::serve {

Server::Impl::~Impl() {
  if (!decoder.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(inbox_mu);
    decoder_stop = true;
  }
  inbox_cv.notify_all();
  decoder.join();
}

void Server::Impl::start(const std::shared_ptr<Running>& r) {
  r->experts_before = model->io().experts ? model->io().experts->stats() : ExpertStats{};
  auto done = [this, r](const GenerateResult& res, std::exception_ptr error) {
    r->experts_after = model->io().experts ? model->io().experts->stats() : ExpertStats{};
    {
      std::lock_guard<std::mutex> lock(mu);
      counters.cache_entries = cache->entries();
      counters.cache_bytes = cache->bytes();
      counters.experts = r->experts_after;
    }
    std::lock_guard<std::mutex> lock(r->mu);
    r->result = res;
    r->error = error;
    r->done = true;
    r->cv.notify_all();
  };
  try {
    batch->add(r->prompt, r->opt, r->on_token, done);
  } catch (...) {
    done(GenerateResult{}, std::current_exception());
  }
}

void Server::Impl::decode_loop() {
  Batch::Stats last;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(inbox_mu);
      inbox_cv.wait(lock, [&] { return decoder_stop || !inbox.empty() || batch->active() > 0; });
      if (decoder_stop && batch->active() == 0) {
        for (auto& r : inbox) {  // nobody waits for these by now; answer them anyway
          std::lock_guard<std::mutex> l(r->mu);
          r->error = std::make_exception_ptr(std::runtime_error("the server stopped"));
          r->done = true;
          r->cv.notify_all();
        }
        inbox.clear();
        return;
      }
      while (!inbox.empty() && !batch->full()) {
        std::shared_ptr<Running> r = std::move(inbox.front());
        inbox.pop_front();
        start(r);
      }
    }
    active = batch->active();
    generating = active > 0;
    if (active == 0) continue;
    try {
      batch->step();  // a failed pass ends its generations with the error (engine/batch.h)
    } catch (const std::exception& e) {  // anything else: said, and the loop goes on
      log_message(std::string("decode step: ") + e.what(), opt.log_json);
    }
    const Batch::Stats& s = batch->stats();
    if (s.passes > last.passes) {
      metrics.observe("sluice_rows_per_pass", double(s.last_rows));
      metrics.add("sluice_decode_passes_total", double(s.passes - last.passes));
      metrics.add("sluice_decode_rows_total", double(s.rows - last.rows));
      metrics.add("sluice_fused_prompt_rows_total", double(s.prompt_rows - last.prompt_rows));
      metrics.add("sluice_draft_proposed_total", double(s.draft_proposed - last.draft_proposed));
      metrics.add("sluice_draft_accepted_total", double(s.draft_accepted - last.draft_accepted));
      metrics.set("sluice_weight_bytes_read_total", double(model_bytes_read(*model)));
      std::lock_guard<std::mutex> lock(mu);
      batch_stats = s;
    }
    last = s;
    active = batch->active();
    generating = active > 0;
  }
}

void Server::Impl::generate_on_decoder(const std::shared_ptr<Running>& r, const std::function<bool(Piece&)>& emit,
                                       const std::function<bool()>& gone,
                                       const std::function<void(size_t, size_t)>& tick) {
  {
    std::lock_guard<std::mutex> lock(inbox_mu);
    inbox.push_back(r);
  }
  inbox_cv.notify_all();
  std::unique_lock<std::mutex> lock(r->mu);
  for (;;) {
    r->cv.wait_for(lock, kWaitSlice, [&] { return r->done || !r->pieces.empty() || r->progress_new; });
    std::deque<Piece> pieces;
    pieces.swap(r->pieces);
    const bool progress = r->progress_new;
    const size_t done = r->progress_done, total = r->progress_total;
    r->progress_new = false;
    const bool finished = r->done;
    lock.unlock();
    // Written here, not on the decode thread: a slow client holds up only itself.
    for (Piece& p : pieces)
      if (!r->gone && !emit(p)) r->gone = true;
    if (progress) tick(done, total);
    tick(0, 0);
    if (!r->gone && !finished && gone()) r->gone = true;  // the decode thread drops it before its next pass
    if (finished) return;
    lock.lock();
  }
}

}  // namespace sluice::serve
