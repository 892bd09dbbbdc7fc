#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <mutex>

#include "base/bytes.h"

namespace sluice::cli {

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

ProgressLine::ProgressLine(std::string label, double every_s, bool transient)
    : label_(std::move(label)), every_s_(every_s), transient_(transient), tty_(stderr_is_terminal()),
      start_(std::chrono::steady_clock::now()), last_(start_) {}

void ProgressLine::update(const std::string& text, bool final) {
  const auto now = std::chrono::steady_clock::now();
  if (!started_) start_ = last_ = now, started_ = true;  // time the work, not the wait for it
  const double since = std::chrono::duration<double>(now - start_).count();
  char secs[32];
  std::snprintf(secs, sizeof secs, " [%.1f s]", since);
  if (transient_ && tty_) {
    if (!printed_ && since < 1.0) return;  // short work: no line at all
    printed_ = true;
    if (final && tty_) {
      std::fputs("\r\x1b[K", stderr);
      open_ = false;
      std::fflush(stderr);
      return;
    }
  }
  if (tty_) {
    std::fprintf(stderr, "\r\x1b[Ksluice: %s: %s%s%s", label_.c_str(), text.c_str(), secs, final ? "\n" : "");
    open_ = !final;
  } else if (final || !printed_ || std::chrono::duration<double>(now - last_).count() >= every_s_) {
    std::fprintf(stderr, "sluice: %s: %s%s\n", label_.c_str(), text.c_str(), secs);
    last_ = now;
    printed_ = true;
  }
  std::fflush(stderr);
}

void ProgressLine::count(uint64_t done, uint64_t total, const std::string& unit) {
  const int pct = total ? int(100 * done / total) : 100;
  update(std::to_string(done) + " of " + std::to_string(total) + " " + unit + " (" + std::to_string(pct) + "%)",
         done >= total);
}

void ProgressLine::bytes(uint64_t done, uint64_t total) {
  const int pct = total ? int(100 * done / total) : 100;
  update(format_bytes(done) + " of " + format_bytes(total) + " (" + std::to_string(pct) + "%)", done >= total);
}

std::function<void(const std::string&, int, int, const std::string&, int)> retry_lines(std::string label) {
  struct State {
    std::mutex mu;
    std::chrono::steady_clock::time_point last{};
    bool any = false;
  };
  auto st = std::make_shared<State>();
  const bool tty = stderr_is_terminal();
  return [st, tty, label](const std::string& url, int failures, int retries, const std::string& problem, int delay_ms) {
    std::lock_guard<std::mutex> lock(st->mu);
    const auto now = std::chrono::steady_clock::now();
    if (st->any && now - st->last < std::chrono::seconds(1)) return;
    st->any = true;
    st->last = now;
    std::fprintf(stderr, "%ssluice: %s: %s: %s; retry %d of %d in %.1f s\n", tty ? "\r\x1b[K" : "", label.c_str(),
                 url.c_str(), problem.c_str(), failures, retries, delay_ms / 1000.0);
    std::fflush(stderr);
  };
}

ProgressLine::~ProgressLine() {
  if (open_) std::fputs("\n", stderr);
}

}  // namespace sluice::cli
