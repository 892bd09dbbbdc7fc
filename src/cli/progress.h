// cli/progress.h — progress of long work on stderr.
//
// On a terminal one line is redrawn in place (\r, erase to end of line); when
// stderr is a file or a pipe a plain line is written at most every few
// seconds, and always the final one, so logs stay short and readable. On a
// terminal a transient line (a chat turn's prefill) is erased when done, and
// not drawn at all when the work ends within a second.
#pragma once
#include <chrono>
#include <functional>
#include <string>

namespace sluice::cli {

class ProgressLine {
 public:
  // `label` starts every line ("loading", "prefill"); plain lines at most every `every_s` s.
  explicit ProgressLine(std::string label, double every_s = 5.0, bool transient = false);
  // Shows `text`; `final` ends the line (a terminal's live line gets its newline).
  void update(const std::string& text, bool final = false);
  // "12 of 64 tokens (18%)" and the like: done/total with a percentage, plus `unit`.
  void count(uint64_t done, uint64_t total, const std::string& unit);
  // The same for bytes, in human units.
  void bytes(uint64_t done, uint64_t total);
  // Ends a live line left open (nothing when none is).
  ~ProgressLine();

 private:
  std::string label_;
  double every_s_;
  bool transient_, tty_, open_ = false;
  std::chrono::steady_clock::time_point start_, last_;
  bool printed_ = false, started_ = false;
};

bool stderr_is_terminal();

// An HTTP retry (hub/http_client.h's RetryHook) as a stderr line
// "sluice: LABEL: URL: problem; retry 2 of 6 in 0.5 s", at most one a second
// however many connections retry at once (callable from any thread).
std::function<void(const std::string& url, int failures, int retries, const std::string& problem, int delay_ms)>
retry_lines(std::string label);

}  // namespace sluice::cli
