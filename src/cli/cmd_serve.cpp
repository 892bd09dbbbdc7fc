// sluice serve — the OpenAI-compatible HTTP server (serve/server.h).
//   sluice serve --model DIR [--host 127.0.0.1] [--port 8000] [--api-key-file FILE] ...
// Every flag can also come from the environment: --max-tokens from
// SLUICE_MAX_TOKENS, the key from SLUICE_API_KEY (keeps it out of `ps`), ...
// The port listens before the model loads (GET /health answers 503 "loading"
// meanwhile; stderr says so). Once the model is loaded it prints
// "sluice serve: listening on http://HOST:PORT/v1 ..." on stdout (--port 0 picks
// a free port). SIGINT/SIGTERM stop it gracefully: no new connections, waiting
// requests get 503, the running generation may finish for --shutdown-grace
// seconds, then it is cancelled (at once on a second signal); exit code 0.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "base/bytes.h"
#include "base/error.h"
#include "cli/commands.h"
#include "cli/model_args.h"
#include "engine/batch.h"
#include "kernels/device.h"
#include "serve/guard.h"
#include "serve/request_log.h"
#include "serve/request_memory.h"
#include "serve/server.h"
#include "text/chat_defaults.h"
#include "text/tokenizer.h"

namespace sluice::cli {
namespace {

struct ServeArgs {
  ModelArgs m;
  std::string api_key_file, log_format = "text", allowed_hosts;
  serve::ServerOptions opt;
  uint64_t state_cache_mb = 2048;
  double shutdown_grace = 10;
  bool strict = false;
  int test_load_delay_ms = 0;
  std::string draft = "suffix";
  int parallel = 0;  // 0: chosen from the budget (default_parallel)
  std::string request_memory;  // --request-memory SIZE; empty: default_request_memory(budget)
};

// Bytes one sequence's state takes at `ctx` tokens: KDA state (fixed) plus the
// MLA cache (and K3.1 Pro's indexer keys).
uint64_t state_bytes(const ModelConfig& c, int ctx) {
  return new_state_bytes(c) + c.cache_bytes_per_position() * uint64_t(std::max(ctx, 1));
}

// The default --parallel: up to 4 sequences, as many as keep their states
// (at the full context) within an eighth of the budget; at least 1.
int default_parallel(const ModelConfig& c, const ModelOptions& mo) {
  const uint64_t budget = mo.ram_budget ? mo.ram_budget : default_ram_budget();
  const uint64_t one = std::max<uint64_t>(state_bytes(c, mo.max_context), 1);
  return int(std::clamp<uint64_t>(budget / 8 / one, 1, 4));
}

std::string read_key_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) fail(path, "cannot read the API key file");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string key = ss.str();
  while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
  while (!key.empty() && std::isspace(static_cast<unsigned char>(key.front()))) key.erase(key.begin());
  if (key.empty()) fail(path, "the API key file is empty");
  if (key.find_first_of("\r\n") != std::string::npos) fail(path, "the API key file holds more than one line");
  return key;
}

// One of serve's own log lines on stderr, timestamped, in --log-format's form.
[[gnu::format(printf, 2, 3)]] void say(bool log_json, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  serve::log_message(buf, log_json);
}

std::string dir_name(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  size_t slash = dir.rfind('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

// Signals are taken by one thread with sigtimedwait, so every thread blocks them;
// threads created from here on inherit the mask. Returns the stop signals.
sigset_t block_stop_signals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a vanished client is an error on write, not a death
  return stop_signals;
}

// The server options the flags give directly (checked before anything loads),
// and the model's own defaults for requests that give none.
void apply_server_flags(ServeArgs& a) {
  if (!a.api_key_file.empty()) {
    if (!a.opt.api_key.empty()) fail("serve", "give --api-key (SLUICE_API_KEY) or --api-key-file, not both");
    a.opt.api_key = read_key_file(a.api_key_file);
  }
  if (a.log_format != "text" && a.log_format != "json") fail("--log-format", "expected text or json");
  a.opt.log_json = a.log_format == "json";
  a.opt.lenient = !a.strict;
  std::stringstream hosts(a.allowed_hosts);
  for (std::string h; std::getline(hosts, h, ',');)
    if (!h.empty()) a.opt.allowed_hosts.push_back(h);
  a.opt.state_cache_bytes = a.state_cache_mb << 20;
  if (a.opt.model_id.empty()) a.opt.model_id = dir_name(a.m.dir);
  if (a.draft != "none" && a.draft != "suffix") fail("--draft", "expected none or suffix, got '" + a.draft + "'");
  if (a.draft == "none") a.opt.draft.max_tokens = 0;
  a.opt.defaults = text::chat_defaults(a.m.dir);
  const text::ChatDefaults& d = a.opt.defaults;
  say(a.opt.log_json, "request defaults%s: reasoning effort %s, temperature %g, top-p %g, chat max tokens %d",
      std::filesystem::exists(a.m.dir + "/generation_config.json") ? " (generation_config.json)" : "",
      d.reasoning_effort.c_str(), double(d.temperature), double(d.top_p),
      d.max_new_tokens > 0 ? std::min(d.max_new_tokens, a.opt.max_tokens) : a.opt.max_tokens);
}

// The model options for serving: the device, the plan's log lines, and what
// the plan sets aside inside --ram-budget for requests (bodies, N live states,
// saved prefix states, batched passes); says each on the log.
ModelOptions serve_model_options(ServeArgs& a) {
  const bool log_json = a.opt.log_json;
  ModelOptions mopt = model_options(a.m);
  a.opt.device = mopt.backend && std::string(mopt.backend->name) == "cuda" ? "cuda" : "cpu";
  a.opt.device_detail = describe_backend(mopt.backend ? *mopt.backend : cpu_backend());
  if (mopt.on_plan) {  // the plan's lines as serve's log lines (timestamped, --log-format)
    const int ctx = mopt.max_context;
    const std::string device = a.opt.device_detail;
    const std::string basis = budget_basis(a.m);
    mopt.on_plan = [log_json, ctx, device, basis](const MemoryPlan& p) {
      say(log_json, "device: %s", device.c_str());
      say(log_json, "memory plan: %s%s", describe_plan(p, ctx).c_str(), basis.c_str());
    };
  }
  // -c is the context a request may fill, prompt and completion: the plan reserves state for it.
  a.opt.context_length = mopt.max_context;
  // Request bodies are handled inside the budget: the plan sets their memory aside.
  const uint64_t budget = mopt.ram_budget ? mopt.ram_budget : default_ram_budget();
  a.opt.request_memory = a.request_memory.empty() ? serve::default_request_memory(budget)
                                                  : parse_byte_size(a.request_memory, "--request-memory");
  mopt.extra_bytes += a.opt.request_memory;
  const uint64_t prompt_cap = uint64_t(std::max(0, std::min(a.opt.max_prompt_tokens, mopt.max_context - 1)));
  const uint64_t largest = std::min<uint64_t>(a.opt.max_request_bytes,
                                              serve::largest_body(a.opt.request_memory, prompt_cap));
  say(log_json,
      "context %d tokens a request (-c); request bodies: %.1f MiB set aside (--request-memory), up to %.2f MiB each",
      mopt.max_context, a.opt.request_memory / 1048576.0, largest / 1048576.0);
  a.opt.parallel = a.parallel > 0 ? a.parallel : default_parallel(open_checkpoint(a.m.dir, {.allow_unknown = a.m.allow_unknown}).config, mopt);
  // The N live states and the saved prefix states (a chat's prompt end and reply
  // end) live inside --ram-budget: the plan reserves state for them all (a budget
  // below their minimum is refused, naming it) and the prefix cache is held to its share.
  if (a.opt.state_cache_bytes > 0) a.opt.saved_states = 2;
  mopt.saved_states = a.opt.saved_states + a.opt.parallel - 1;
  // A pass holds up to N sequences' rows (drafts included) or a prompt chunk,
  // and returns logits for every decode row: the plan's working buffers hold them.
  plan_batch_passes(mopt, a.opt.parallel, a.opt.draft.max_tokens, a.opt.prefill_chunk_tokens);
  say(log_json, "--parallel %d: up to %d sequences decoded together%s", a.opt.parallel, a.opt.parallel,
      a.parallel > 0 ? "" : " (the default for this budget)");
  return mopt;
}

// The signal thread's loop until `done`: the first SIGINT/SIGTERM stops the
// server (a running generation gets the grace period), the second signal or
// the grace's end cancels the running generation.
void watch_stop_signals(const sigset_t& stop_signals, serve::Server& server, const std::atomic<bool>& done,
                        double shutdown_grace, bool log_json) {
  using Clock = std::chrono::steady_clock;
  const timespec tick{0, 100 * 1000 * 1000};
  int stage = 0;  // 0 serving, 1 stopping (grace), 2 cancelled
  Clock::time_point deadline;
  while (!done) {
    int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    if (sig > 0 && stage == 0) {
      say(log_json, "%s: stopping (a running generation gets %.0f s; signal again to cancel it)",
          sig == SIGINT ? "SIGINT" : "SIGTERM", shutdown_grace);
      server.stop();
      stage = 1;
      deadline = Clock::now() + std::chrono::milliseconds(int64_t(shutdown_grace * 1000));
    } else if (stage == 1 && (sig > 0 || Clock::now() >= deadline)) {
      if (server.running_generation()) say(log_json, "cancelling the running generation");
      server.cancel_running();
      stage = 2;
    }
  }
}

// Opens the model while the port already answers (GET /health: 503 "loading"),
// then hands it to the server.
std::unique_ptr<Model> load_into(serve::Server& server, const ServeArgs& a, const ModelOptions& mopt,
                                 const text::Tokenizer& tok) {
  const auto t0 = std::chrono::steady_clock::now();
  server.set_loading("opening the model");
  if (a.test_load_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.test_load_delay_ms));
  std::unique_ptr<Model> model = open_model(a.m.dir, mopt);
  server.attach(*model, tok);
  const MemoryPlan& p = model->plan();
  say(a.opt.log_json,
      "model loaded in %.1f s (budget %.0f MiB: spine %.0f of %.0f MiB resident, expert cache %.0f MiB)",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), p.budget / 1048576.0,
      p.spine_resident_bytes / 1048576.0, p.spine_total / 1048576.0, p.expert_cache / 1048576.0);
  return model;
}

int run_serve(ServeArgs& a) {
  const sigset_t stop_signals = block_stop_signals();
  apply_server_flags(a);
  const bool log_json = a.opt.log_json;
  const ModelOptions mopt = serve_model_options(a);
  if (a.opt.api_key.empty() && !serve::is_loopback_host(a.opt.host))
    say(log_json,
        "warning: --host %s is reachable from other machines and no API key is set: anyone who can reach it can use "
        "the model (set SLUICE_API_KEY or --api-key-file, or listen on 127.0.0.1)",
        a.opt.host.c_str());

  // Declared before the server, so they outlive it. The tokenizer first: a
  // broken tokenizer file fails in milliseconds, not after the spine has loaded.
  std::unique_ptr<Model> model;
  std::optional<text::Tokenizer> tok;
  tok.emplace(text::Tokenizer::load(a.m.dir));
  serve::Server server(a.opt);
  server.bind();
  say(log_json, "http://%s:%d/ is up; loading the model (GET /health answers 503 until ready)", a.opt.host.c_str(),
      server.port());

  std::exception_ptr http_error;
  std::thread http([&] {
    try {
      server.serve();
    } catch (...) {
      http_error = std::current_exception();
    }
  });
  std::atomic<bool> done{false};
  std::thread signals([&] { watch_stop_signals(stop_signals, server, done, a.shutdown_grace, log_json); });
  auto finish = [&] {
    server.stop();
    http.join();
    done = true;
    signals.join();
  };
  try {
    model = load_into(server, a, mopt, *tok);
  } catch (...) {
    finish();
    throw;
  }
  std::printf("sluice serve: listening on http://%s:%d/v1 (model \"%s\", parallel %d, queue %d, max tokens %d)\n",
              a.opt.host.c_str(), server.port(), server.model_id().c_str(), a.opt.parallel, a.opt.queue,
              a.opt.max_tokens);
  std::fflush(stdout);
  http.join();
  done = true;
  signals.join();
  if (http_error) std::rethrow_exception(http_error);
  say(log_json, "stopped");
  return 0;
}

Command reg("serve", "Serve the model over an OpenAI-compatible HTTP API", [](CLI::App& sub, Action* action) {
  auto a = std::make_shared<ServeArgs>();
  serve::ServerOptions& o = a->opt;
  add_model_options(sub, a->m);
  sub.add_option("--host", o.host, "Address to listen on")->capture_default_str();
  sub.add_option("--port", o.port, "Port (0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  sub.add_option("--api-key", o.api_key, "Require 'Authorization: Bearer KEY' (prefer SLUICE_API_KEY or --api-key-file)");
  sub.add_option("--api-key-file", a->api_key_file, "File holding the API key (one line)");
  sub.add_option("--parallel", a->parallel,
                 "Sequences decoded together, one pass per step (default: up to 4, as the budget allows)")
      ->check(CLI::Range(1, 256));
  sub.add_option("--queue", o.queue, "Requests that may wait behind the running ones; more get 429")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  sub.add_option("--max-tokens", o.max_tokens,
                 "Most completion tokens per request (and the chat default when generation_config.json has none)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 30));
  sub.add_option("--max-prompt-tokens", o.max_prompt_tokens, "Most prompt tokens per request; longer get 400")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 30));
  sub.add_option("--max-request-bytes", o.max_request_bytes, "Largest request body, decoded; larger get 413")
      ->capture_default_str()
      ->check(CLI::Range(size_t(1024), size_t(1) << 32));
  sub.add_option("--request-memory", a->request_memory,
                 "Memory set aside for reading and parsing request bodies, inside --ram-budget (default: an eighth "
                 "of the budget, 4 MiB to 1 GiB); a body that does not fit waits, then gets 503")
      ->transform(byte_size("--request-memory"));
  sub.add_option("--served-model-name", o.model_id, "Model id clients send (default: the directory name)");
  sub.add_option("--state-cache-mb", a->state_cache_mb, "Memory for saved prefix states (0: no reuse)")
      ->capture_default_str();
  sub.add_option("--shutdown-grace", a->shutdown_grace, "Seconds a running generation may finish after SIGTERM")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  sub.add_option("--log-format", a->log_format, "Request log lines on stderr: text or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  sub.add_flag("--strict", a->strict,
               "Refuse vendor fields (min_p, repetition_penalty, ...) and reasoning_effort 'minimal' with 400 "
               "(default: ignore them with a warning in the log)");
  sub.add_option("--allowed-hosts", a->allowed_hosts,
                 "Host names accepted in the Host header besides IP addresses, localhost and --host "
                 "(comma-separated; '*': any)");
  sub.add_option("--header-timeout", o.header_timeout, "Seconds a connection may take to send a request's headers")
      ->capture_default_str()
      ->check(CLI::Range(0.5, 3600.0));
  sub.add_option("--max-connections", o.max_connections, "Connections served at once")
      ->capture_default_str()
      ->check(CLI::Range(8, 4096));
  sub.add_option("--sse-ping-seconds", o.ping_seconds,
                 "Streaming: send a ': ping' comment after this many seconds without output (0: every prefill chunk)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  sub.add_option("--prefill-chunk", o.prefill_chunk_tokens,
                 "Prompt tokens per prefill pass; cancellation and pings are checked between passes")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  sub.add_option("--retry-grace", o.retry_grace,
                 "Seconds a non-streaming generation keeps running after its client left, for an identical retry "
                 "to take over its reply")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  sub.add_option("--draft", a->draft, "Speculative drafts from the text itself: suffix, or none (off)")
      ->capture_default_str();
  sub.add_option("--draft-max", a->opt.draft.max_tokens, "Most draft tokens verified per pass")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  // Test hooks (a slow model without a big one); hidden from --help.
  sub.add_option("--test-prefill-delay-ms", o.test_chunk_delay_ms)->group("");
  sub.add_option("--test-load-delay-ms", a->test_load_delay_ms)->group("");
  // Every flag from the environment too: --max-tokens <- SLUICE_MAX_TOKENS.
  for (CLI::Option* opt : sub.get_options()) {
    if (opt->get_lnames().empty() || opt->get_lnames()[0] == "help" || opt->get_group().empty()) continue;
    std::string env = "SLUICE_" + opt->get_lnames()[0];
    for (char& ch : env) ch = ch == '-' ? '_' : char(std::toupper(static_cast<unsigned char>(ch)));
    opt->envname(env);
  }
  *action = [a] { return run_serve(*a); };
});

}  // namespace
}  // namespace sluice::cli
