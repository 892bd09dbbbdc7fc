// sluice serve — the OpenAI-compatible HTTP server (serve/server.h).
//   sluice serve --model DIR [--host 127.0.0.1] [--port 8000] [--api-key KEY]
//                [--queue N] [--max-tokens N] [--max-request-bytes N]
// Prints "sluice serve: listening on http://HOST:PORT/v1 ..." on stdout once it
// accepts connections (--port 0 picks a free port). SIGINT/SIGTERM stop it
// gracefully: no new connections, waiting requests get 503, the running
// generation may finish for --shutdown-grace seconds, then it is cancelled
// (at once on a second signal); exit code 0.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/model_args.h"
#include "serve/server.h"
#include "text/tokenizer.h"

namespace sluice::cli {
namespace {

struct ServeArgs {
  ModelArgs m;
  serve::ServerOptions opt;
  uint64_t state_cache_mb = 2048;
  double shutdown_grace = 10;
};

int run_serve(ServeArgs& a) {
  // Signals are taken by one thread with sigtimedwait, so every thread blocks them;
  // threads created from here on inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a vanished client is an error on write, not a death

  a.opt.state_cache_bytes = a.state_cache_mb << 20;
  auto model = open_model_cli(a.m);
  text::Tokenizer tok = text::Tokenizer::load(a.m.dir);
  serve::Server server(*model, tok, a.opt);
  server.bind();
  std::printf("sluice serve: listening on http://%s:%d/v1 (model \"%s\", queue %d, max tokens %d)\n",
              a.opt.host.c_str(), server.port(), server.model_id().c_str(), a.opt.queue, a.opt.max_tokens);
  std::fflush(stdout);

  std::atomic<bool> done{false};
  std::thread signals([&] {
    using Clock = std::chrono::steady_clock;
    const timespec tick{0, 100 * 1000 * 1000};
    int stage = 0;  // 0 serving, 1 stopping (grace), 2 cancelled
    Clock::time_point deadline;
    while (!done) {
      int sig = sigtimedwait(&stop_signals, nullptr, &tick);
      if (sig > 0 && stage == 0) {
        std::fprintf(stderr, "sluice serve: %s: stopping (a running generation gets %.0f s; signal again to cancel it)\n",
                     sig == SIGINT ? "SIGINT" : "SIGTERM", a.shutdown_grace);
        server.stop();
        stage = 1;
        deadline = Clock::now() + std::chrono::milliseconds(int64_t(a.shutdown_grace * 1000));
      } else if (stage == 1 && (sig > 0 || Clock::now() >= deadline)) {
        if (server.running_generation()) std::fprintf(stderr, "sluice serve: cancelling the running generation\n");
        server.cancel_running();
        stage = 2;
      }
    }
  });
  try {
    server.serve();
  } catch (...) {
    done = true;
    signals.join();
    throw;
  }
  done = true;
  signals.join();
  std::fprintf(stderr, "sluice serve: stopped\n");
  return 0;
}

Command reg("serve", "Serve the model over an OpenAI-compatible HTTP API", [](CLI::App& sub, Action* action) {
  auto a = std::make_shared<ServeArgs>();
  add_model_options(sub, a->m);
  sub.add_option("--host", a->opt.host, "Address to listen on")->capture_default_str();
  sub.add_option("--port", a->opt.port, "Port (0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  sub.add_option("--api-key", a->opt.api_key, "Require 'Authorization: Bearer KEY'");
  sub.add_option("--queue", a->opt.queue, "Requests that may wait behind the running one; more get 429")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  sub.add_option("--max-tokens", a->opt.max_tokens, "Most completion tokens per request (and the chat default)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 30));
  sub.add_option("--max-request-bytes", a->opt.max_request_bytes, "Largest request body; larger get 413")
      ->capture_default_str()
      ->check(CLI::Range(size_t(1024), size_t(1) << 32));
  sub.add_option("--served-model-name", a->opt.model_id, "Model id clients send (default: the directory name)");
  sub.add_option("--state-cache-mb", a->state_cache_mb, "Memory for saved prefix states (0: no reuse)")
      ->capture_default_str();
  sub.add_option("--shutdown-grace", a->shutdown_grace, "Seconds a running generation may finish after SIGTERM")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  *action = [a] { return run_serve(*a); };
});

}  // namespace
}  // namespace sluice::cli
