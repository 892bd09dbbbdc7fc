// sluice run — generate from a prompt, or chat interactively.
//   sluice run --model DIR --tokens 448,259,309 --max-new 16 --ids   # greedy ids, one stdout line
//   sluice run --model DIR --prompt "Once upon a time"                # raw continuation, streamed
//   sluice run --model DIR --chat "Hello" [--system TEXT]              # one chat turn
//   sluice run --model DIR                                             # interactive chat (stdin a terminal)
//   echo "Hello" | sluice run --model DIR                              # one chat turn from stdin
// Text goes to stdout as it is generated; a chat reply's reasoning goes to
// stderr, dimmed on a terminal and between <think> and </think> lines
// otherwise (--hide-reasoning drops it). The interactive chat edits lines with
// readline (history, a pasted block of lines is one turn) and takes /help,
// /reset, /save FILE and /exit. Sampling: --temperature --top-p --top-k --seed --stop (repeatable,
// matched on the text, never printed). --prompt and the chat sample as the server
// does: the model's generation_config.json (text/chat_defaults.h), else temperature 1;
// --temperature 0 is greedy. --tokens, the probe for checks, is greedy unless told. --stats prints a
// summary line and the expert source's JSON line (cli/expert_stats.h) to stderr. Ctrl-C stops the generation (exit 130; in the interactive
// chat it returns to the prompt); a second Ctrl-C exits. At the chat's prompt
// Ctrl-C clears the line and keeps the conversation; Ctrl-D or /exit quits.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <optional>
#include <random>
#include <string>

#include <readline/history.h>
#include <readline/readline.h>

#include "base/atomic_file.h"
#include "base/error.h"
#include "cli/commands.h"
#include "cli/expert_stats.h"
#include "cli/model_args.h"
#include "cli/progress.h"
#include "cli/token_list.h"
#include "engine/generate.h"
#include "serve/reply.h"
#include "text/chat.h"
#include "text/chat_defaults.h"
#include "text/tokenizer.h"

namespace sluice::cli {
namespace {

struct RunArgs {
  ModelArgs m;
  std::string tokens, prompt, chat, system;
  std::string reasoning_effort;  // "": the model's default (text/chat_defaults.h)
  int max_new = 16, batch = 256;
  bool max_new_given = false;
  float temperature = 0, top_p = 1;
  int top_k = 0;
  uint64_t seed = 0;
  bool seed_given = false, temperature_given = false, top_p_given = false;
  std::vector<std::string> stop;
  bool ids = false, stats = false, hide_reasoning = false;
  std::string draft = "suffix";
  int draft_max = DraftOptions{}.max_tokens;
  std::string draft_window = "adaptive";
};

// Ctrl-C: the first one cancels the running generation; a second one, or one
// while nothing is generating, exits at once. At the interactive chat's prompt
// it only marks the line for clearing (clear_line_after_ctrl_c, below).
std::atomic<bool> g_generating{false}, g_at_prompt{false};
std::atomic<int> g_interrupts{0};
volatile sig_atomic_t g_clear_line = 0;

void on_sigint(int) {
  if (g_at_prompt.load()) {
    g_clear_line = 1;
    return;
  }
  if (!g_generating.load() || g_interrupts.fetch_add(1) >= 1) {
    const char nl = '\n';
    (void)!write(STDERR_FILENO, &nl, 1);
    _exit(130);
  }
}

void install_sigint() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a read at the prompt returns
  sigaction(SIGINT, &sa, nullptr);
}

// Readline's hook after a signal interrupted its read (outside the handler,
// where readline may be called): a Ctrl-C drops the line being typed and
// draws a fresh prompt, as a shell does.
int clear_line_after_ctrl_c() {
  if (!g_clear_line) return 0;
  g_clear_line = 0;
  rl_replace_line("", 0);
  rl_crlf();
  rl_on_new_line();
  rl_redisplay();
  return 0;
}

// A summary line, then the expert source's JSON line (cli/expert_stats.h).
void print_stats(const GenerateResult& r, const Model& model, const ExpertStats& before) {
  const ExpertStats now = model.io().experts->stats();
  const int computed = r.prompt_tokens - r.cached_tokens;
  std::fprintf(stderr, "sluice: prompt %d tokens (%d reused, %d computed in %.3f s", r.prompt_tokens, r.cached_tokens,
               computed, r.prefill_seconds);
  if (computed > 0 && r.prefill_seconds > 0) std::fprintf(stderr, ", %.1f tok/s", computed / r.prefill_seconds);
  std::fprintf(stderr, "); generated %d tokens", r.generated_tokens);
  if (r.generated_tokens > 0) std::fprintf(stderr, ", first after %.3f s", r.first_token_seconds);
  if (r.generated_tokens > 1 && r.decode_seconds > 0)
    std::fprintf(stderr, ", decode %.2f tok/s", (r.generated_tokens - 1) / r.decode_seconds);
  const uint64_t fetched = now.fetched - before.fetched, hits = now.cache_hits - before.cache_hits;
  std::fprintf(stderr, "; experts: %llu spans, %.1f MB read, cache hit rate %.1f%%\n", (unsigned long long)fetched,
               double(now.bytes_read - before.bytes_read) / 1e6, fetched ? 100.0 * double(hits) / double(fetched) : 0.0);
  nlohmann::json j = nlohmann::json::parse(cli::expert_stats_json(model, r.prompt_tokens + r.generated_tokens));
  j["tokens_per_pass"] = r.tokens_per_pass();
  j["draft_acceptance"] = r.draft_acceptance();
  j["bytes_per_token"] = r.generated_tokens > 1 ? double(r.decode_bytes_read) / (r.generated_tokens - 1) : 0.0;
  std::fprintf(stderr, "%s\n", j.dump().c_str());
}

struct Runner {
  const RunArgs& a;
  Model& model;
  Session session;
  PrefixCache cache;
  std::optional<text::Tokenizer> tok;

  int ctx;  // -c/--ctx-size: the positions the plan reserved state for, a hard limit

  Runner(const RunArgs& args, Model& m, uint64_t cache_bytes, int context)
      : a(args), model(m), session(m), cache(cache_bytes), ctx(context) {}

  const text::Tokenizer& tokenizer() {
    if (!tok) tok = text::Tokenizer::load(a.m.dir);
    return *tok;
  }

  GenerateOptions options(std::vector<int> stop_ids) const {
    GenerateOptions o;
    o.max_new_tokens = a.max_new;
    o.sampling.temperature = a.temperature;
    o.sampling.top_p = a.top_p;
    o.sampling.top_k = a.top_k;
    o.sampling.seed = a.seed_given ? a.seed : std::random_device{}();
    o.stop_ids = std::move(stop_ids);
    o.cancelled = [] { return g_interrupts.load() > 0; };
    o.draft.max_tokens = a.draft == "none" ? 0 : a.draft_max;
    o.draft.fixed_window = a.draft_window == "fixed";
    o.prefill_chunk_tokens = a.batch;
    return o;
  }

  // Generates from `prompt`; prints ids (--ids) or text as it comes. Returns the
  // reply (for the chat history) and whether it was cancelled.
  struct Turn {
    std::string reasoning, content;
    bool cancelled = false;
  };
  Turn generate_and_print(std::span<const int> prompt, bool chat, bool thinking, std::vector<int> stop_ids) {
    GenerateOptions o = options(std::move(stop_ids));
    // The prompt must leave room in the context for a token; the reply stops at its end.
    if (int64_t(prompt.size()) >= ctx)
      fail("run", "the prompt is " + std::to_string(prompt.size()) + " tokens and the context (-c/--ctx-size) is " +
                      std::to_string(ctx) + ": no room for a reply (give a larger -c)");
    o.max_new_tokens = int(std::min<int64_t>(o.max_new_tokens, ctx - int64_t(prompt.size())));
    // Progress only for a prompt of several chunks (there is nothing to show before the first ends).
    std::optional<ProgressLine> progress;
    if (prompt.size() > size_t(a.batch)) {
      progress.emplace("prefill", 5.0, /*transient=*/chat);
      o.prefill_progress = [&](size_t done, size_t total) { progress->count(done, total, "tokens"); };
    }
    std::optional<serve::ReplyBuilder> reply;
    if (!a.ids) reply.emplace(tokenizer(), serve::ReplyOptions{chat, thinking, a.stop, false});
    std::vector<int> ids;
    Turn turn;
    serve::Piece piece;
    const bool tty = stderr_is_terminal();
    bool in_reasoning = false;  // a reasoning block is open on stderr
    auto end_reasoning = [&] {
      if (!in_reasoning) return;
      in_reasoning = false;
      if (tty) std::fputs("\x1b[0m\n", stderr);
      else std::fputs(turn.reasoning.ends_with('\n') ? "</think>\n" : "\n</think>\n", stderr);
      std::fflush(stderr);
    };
    auto print = [&] {
      if (!piece.reasoning.empty()) {
        if (!a.hide_reasoning) {
          if (!in_reasoning) std::fputs(tty ? "\x1b[2m" : "<think>\n", stderr);
          in_reasoning = true;
          std::fputs(piece.reasoning.c_str(), stderr);
          if (tty) std::fflush(stderr);
        }
        turn.reasoning += piece.reasoning;
      }
      if (!piece.content.empty()) end_reasoning();
      if (!piece.content.empty()) {
        std::fputs(piece.content.c_str(), stdout);
        std::fflush(stdout);
        turn.content += piece.content;
      }
      piece = serve::Piece{};
    };
    const ExpertStats before = model.io().experts->stats();
    g_interrupts = 0;
    g_generating = true;
    GenerateResult r = generate(session, prompt, o, &cache, [&](const TokenEvent& ev) {
      if (!reply) {
        ids.push_back(ev.id);
        return Verdict::go;
      }
      Verdict v = reply->push(ev, piece);
      print();
      return v;
    });
    g_generating = false;
    turn.cancelled = r.finish == Finish::cancelled;
    if (reply) {
      if (!turn.cancelled) reply->finish(piece);
      print();
      end_reasoning();
      std::fputs("\n", stdout);
    } else {
      std::string line;
      for (size_t i = 0; i < ids.size(); i++) line += (i ? " " : "") + std::to_string(ids[i]);
      std::printf("%s\n", line.c_str());
    }
    std::fflush(stdout);
    if (turn.cancelled) std::fprintf(stderr, "sluice: stopped\n");
    if (a.stats) print_stats(r, model, before);
    return turn;
  }

  text::ChatOptions chat_options() const {
    text::ChatOptions co;
    if (a.reasoning_effort == "none")
      co.thinking = false;
    else
      co.reasoning_effort = a.reasoning_effort;
    return co;
  }

  nlohmann::json first_messages() const {
    nlohmann::json m = nlohmann::json::array();
    if (!a.system.empty()) m.push_back({{"role", "system"}, {"content", a.system}});
    return m;
  }

  int chat_once(const std::string& user) {
    nlohmann::json msgs = first_messages();
    msgs.push_back({{"role", "user"}, {"content", user}});
    text::ChatOptions co = chat_options();
    std::vector<int> prompt = text::render_chat(tokenizer(), msgs, co);
    return generate_and_print(prompt, true, co.thinking, text::chat_stop_ids(tokenizer())).cancelled ? 130 : 0;
  }

  static constexpr const char* kHelp =
      "  /help   this list\n"
      "  /reset  forget the conversation (the system message stays)\n"
      "  /save FILE  write the conversation to FILE (JSON: {\"messages\": [...]})\n"
      "  /exit   quit (also /quit or Ctrl-D)\n"
      "  Ctrl-C at the prompt clears the line; while a reply is written it stops the reply.\n"
      "  Arrow keys edit the line and walk the history;\n"
      "  a pasted block of several lines is one message.\n";

  // One line from readline (history, editing; a bracketed paste keeps its
  // newlines in the one line). False at end of input.
  static bool read_message(std::string* out) {
    g_clear_line = 0;
    g_at_prompt = true;
    char* line = readline("> ");
    g_at_prompt = false;
    if (!line) return false;
    *out = line;
    std::free(line);
    while (!out->empty() && (out->back() == '\n' || out->back() == '\r' || out->back() == ' ')) out->pop_back();
    if (!out->empty()) add_history(out->c_str());
    return true;
  }

  // /save FILE: the conversation as a chat request's messages, written atomically.
  static void save(const std::string& file, const nlohmann::json& msgs) {
    if (file.empty()) {
      std::fputs("sluice: /save needs a file name (/save chat.json)\n", stderr);
      return;
    }
    try {
      write_file_atomic(file, nlohmann::json{{"messages", msgs}}.dump(2) + "\n");
      std::fprintf(stderr, "sluice: saved %zu messages to %s\n", msgs.size(), file.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sluice: /save: %s\n", e.what());  // the conversation goes on
    }
  }

  int interactive() {
    std::fprintf(stderr, "sluice: chatting with %s. /help lists commands; Ctrl-C stops a reply; /exit or Ctrl-D quits.\n",
                 a.m.dir.c_str());
    rl_outstream = stderr;  // the prompt and the echo stay off stdout, which carries only replies
    rl_signal_event_hook = clear_line_after_ctrl_c;
    text::ChatOptions co = chat_options();
    nlohmann::json msgs = first_messages();
    std::string line;
    while (read_message(&line)) {
      if (line.empty()) continue;
      if (line[0] == '/' && line.find('\n') == std::string::npos) {
        if (line == "/exit" || line == "/quit") break;
        if (line == "/reset") {
          msgs = first_messages();
          std::fputs("sluice: conversation reset\n", stderr);
        } else if (line == "/save" || line.starts_with("/save ")) {
          save(line.substr(std::min(line.find_first_not_of(' ', 5), line.size())), msgs);
        } else if (line == "/help" || line == "/?") {
          std::fputs(kHelp, stderr);
        } else {
          std::fprintf(stderr, "sluice: unknown command %s (/help lists them)\n", line.c_str());
        }
        continue;
      }
      msgs.push_back({{"role", "user"}, {"content", line}});
      std::vector<int> prompt = text::render_chat(tokenizer(), msgs, co);
      Turn t;
      try {
        t = generate_and_print(prompt, true, co.thinking, text::chat_stop_ids(tokenizer()));
      } catch (const Error& e) {  // the conversation outgrew the context: say so, keep the chat
        std::fprintf(stderr, "sluice: %s (/reset starts over)\n", e.what());
        msgs.erase(msgs.size() - 1);
        continue;
      }
      nlohmann::json reply = {{"role", "assistant"}, {"content", t.content}};
      if (co.thinking && !t.reasoning.empty()) reply["reasoning_content"] = t.reasoning;
      msgs.push_back(reply);
    }
    std::fputs("\n", stderr);
    return 0;
  }
};

int run_run(RunArgs& a) {
  const int given = !a.tokens.empty() + !a.prompt.empty() + !a.chat.empty();
  if (given > 1) fail("run", "give one of --tokens, --prompt and --chat");
  const bool chat = a.tokens.empty() && a.prompt.empty();
  const text::ChatDefaults defaults = text::chat_defaults(a.m.dir);
  // A chat reply, not a 16-token probe: the model's length, else K3's 4096.
  if (!a.max_new_given && chat) a.max_new = defaults.max_new_tokens > 0 ? defaults.max_new_tokens : 4096;
  if (a.reasoning_effort.empty()) {
    a.reasoning_effort = defaults.reasoning_effort;
  } else {
    std::string e = text::thinking_effort(a.reasoning_effort);  // medium is taken as high
    if (e.empty()) fail("--reasoning-effort", "expected none, low, medium, high or max, got '" + a.reasoning_effort + "'");
    a.reasoning_effort = e;
  }
  // Text sampled as the server samples it (a greedy continuation loops); --tokens stays greedy.
  if (a.tokens.empty() && !a.temperature_given) a.temperature = defaults.temperature;
  if (a.tokens.empty() && !a.top_p_given) a.top_p = defaults.top_p;
  if (a.draft != "none" && a.draft != "suffix") fail("--draft", "expected none or suffix, got '" + a.draft + "'");
  SamplingParams sp{a.temperature, a.top_p, a.top_k, 0};
  check_sampling_params(sp);

  std::vector<int> token_prompt;
  if (!a.tokens.empty()) token_prompt = parse_token_list(a.tokens, "--tokens");
  // The tokenizer first: a broken tokenizer file fails in milliseconds, not after
  // the model's spine has loaded. (--tokens --ids needs none.)
  std::optional<text::Tokenizer> tok;
  if (token_prompt.empty() || !a.ids) tok.emplace(text::Tokenizer::load(a.m.dir));
  // The prompt and a piped message too: an empty one is a usage error, said
  // before the spine loads.
  std::vector<int> text_prompt;
  if (!a.prompt.empty()) {
    text_prompt = tok->encode(a.prompt, /*allow_special=*/true);
    if (text_prompt.empty()) fail("--prompt", "the prompt is empty");
  }
  std::string piped;
  if (chat && a.chat.empty() && !isatty(STDIN_FILENO)) {
    piped.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    while (!piped.empty() && (piped.back() == '\n' || piped.back() == '\r')) piped.pop_back();
    if (piped.empty()) fail("run", "give --tokens, --prompt or --chat, pipe a message on stdin, or run on a terminal");
  }
  ModelOptions mo = model_options(a.m);
  mo.chunk_tokens = a.batch;
  // Saved prefix states (the prompt end and the reply end, for the next chat turn) are part of the plan.
  mo.saved_states = 2;
  auto model = open_model(a.m.dir, mo);
  Runner r(a, *model, model->plan().state_reserve / 3 * 2, mo.max_context);
  r.tok = std::move(tok);
  install_sigint();

  if (!token_prompt.empty()) {
    // --ids keeps its contract: the plain continuation, no stop ids.
    std::vector<int> stops = a.ids ? std::vector<int>{} : text::chat_stop_ids(r.tokenizer());
    return r.generate_and_print(token_prompt, false, false, stops).cancelled ? 130 : 0;
  }
  if (!text_prompt.empty())
    return r.generate_and_print(text_prompt, false, false, text::chat_stop_ids(r.tokenizer())).cancelled ? 130 : 0;
  if (!a.chat.empty()) return r.chat_once(a.chat);
  if (piped.empty()) return r.interactive();
  return r.chat_once(piped);
}

Command reg("run", "Generate from a prompt, or chat (interactively on a terminal)", [](CLI::App& sub, Action* action) {
  auto a = std::make_shared<RunArgs>();
  add_model_options(sub, a->m);
  sub.add_option("--tokens", a->tokens, "Prompt as token ids, e.g. 448,259,309");
  sub.add_option("-p,--prompt", a->prompt, "Prompt text to continue (special-token spellings are the tokens)");
  sub.add_option("--chat", a->chat, "One user message; the reply is printed");
  sub.add_option("--system", a->system, "A system message for --chat and the interactive chat");
  sub.add_option("--reasoning-effort", a->reasoning_effort,
                 "Chat thinking: none, low, high or max (medium is taken as high; default: the model's, else max)");
  sub.add_flag("--hide-reasoning", a->hide_reasoning, "Do not print a chat reply's reasoning");
  CLI::Option* max_new =
      sub.add_option("-n,--max-new", a->max_new, "Most tokens to generate (default 16; chat: the model's, else 4096)")
          ->check(CLI::NonNegativeNumber);
  sub.add_option("-b,--batch-size", a->batch, "Prompt tokens computed per chunk (progress and Ctrl-C between chunks)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  CLI::Option* temperature =
      sub.add_option("--temperature", a->temperature, "Sampling temperature (0: greedy; default: the model's generation_config.json, else 1; --tokens: 0)");
  CLI::Option* top_p = sub.add_option("--top-p", a->top_p, "Nucleus sampling mass, (0, 1] (default: the model's, else 1)");
  sub.add_option("--top-k", a->top_k, "Sample from the k most probable tokens (0: all)")->capture_default_str();
  CLI::Option* seed = sub.add_option("-s,--seed", a->seed, "Sampling seed (default: random)");
  sub.add_option("--stop", a->stop, "Stop sequence (repeatable); matched on the text, never printed");
  sub.add_option("--draft", a->draft, "Speculative drafts from the text itself: suffix, or none (off)")
      ->capture_default_str();
  sub.add_option("--draft-window", a->draft_window,
                 "adaptive (drafts per pass follow acceptance) or fixed (always up to --draft-max; for comparisons)")
      ->check(CLI::IsMember({"adaptive", "fixed"}))
      ->capture_default_str();
  sub.add_option("--draft-max", a->draft_max, "Most draft tokens verified per pass")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub.add_flag("--ids", a->ids, "Print generated token ids (space-separated) instead of text");
  sub.add_flag("--stats", a->stats,
               "Print tokens, speeds and expert reads to stderr at the end (then the expert source's JSON line)");
  *action = [a, max_new, seed, temperature, top_p] {
    a->max_new_given = max_new->count() > 0;
    a->seed_given = seed->count() > 0;
    a->temperature_given = temperature->count() > 0;
    a->top_p_given = top_p->count() > 0;
    return run_run(*a);
  };
});

}  // namespace
}  // namespace sluice::cli
