// sluice setup — install a checkpoint from the Hugging Face hub (or a server laid out like it).
//   sluice setup --repo ORG/NAME [--revision REV] [--hub URL] --dest DIR --full|--stream
//                [--max-cache-bytes N] [--jobs N] [--connections N] [--skip-space-check]
//                [--retries N] [--stall-timeout S] [--backoff-ms MS] [--include GLOB] [--exclude GLOB]
//                [--pack lossless|int8] [--drives PATH[:WEIGHT],... [--copies N]]
// --drives (with --full) sends the routed experts straight to a stripe over
// those drives (hub/setup_drives.h): DEST holds the header and the spine.
// --pack writes the spine pack (pack/pack.h) once the shards' spine has landed,
// as `sluice pack` would: a stream install has every spine byte on disk.
// Progress goes to stderr: one redrawn line on a terminal, a plain line every
// few seconds otherwise; the rate (and so the ETA) is over the last 10 seconds;
// each retry is reported. The hub is --hub, else $HF_ENDPOINT; the token
// $HF_TOKEN, else $HF_HOME/token (hub/hf_env.h).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>

#include "base/atomic_file.h"
#include "base/bytes.h"
#include "base/error.h"
#include "cli/commands.h"
#include "hub/hf_env.h"
#include "hub/http_client.h"
#include "hub/http_setup.h"
#include "hub/setup_drives.h"
#include "cli/drives_arg.h"
#include "cli/model_args.h"
#include "cli/pack_spine.h"

namespace sluice::cli {
namespace {

struct SetupArgs {
  std::string repo, revision = "main", hub, dest, max_cache = "0", pack, drives;
  int copies = 1;
  std::vector<std::string> include, exclude;
  bool full = false, stream = false, skip_space_check = false, allow_unknown = false;
  int jobs = 4, connections = 8, retries = 6, stall_timeout = 30, backoff_ms = 250;
};

std::string human_bytes(double b) { return format_bytes(uint64_t(b)); }

std::string human_time(double s) {
  if (s < 0 || s > 1e8) return "?";
  long t = long(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

int run_setup_cmd(const SetupArgs& a) {
  if (a.full == a.stream) fail("setup", "give exactly one of --full or --stream");
  if (!a.drives.empty() && !a.full) fail("--drives", "needs --full (a stream install's experts stay on the hub)");
  remove_temps_on_signal("setup");  // downloads' .part files stay: the next run resumes them
  SetupOptions o;
  o.source.hub = a.hub.empty() ? hf_endpoint() : a.hub;
  while (!o.source.hub.empty() && o.source.hub.back() == '/') o.source.hub.pop_back();
  o.source.repo = a.repo;
  o.source.revision = a.revision;
  o.dest = a.dest;
  o.mode = a.full ? SetupMode::full : SetupMode::stream;
  o.jobs = a.jobs;
  o.connections = a.connections;
  o.check_space = !a.skip_space_check;
  o.allow_unknown = a.allow_unknown;
  o.max_cache_bytes = parse_byte_size(a.max_cache, "--max-cache-bytes", /*allow_zero=*/true);
  o.include = a.include;
  o.exclude = a.exclude;
  o.http.retries = a.retries;
  o.http.stall_timeout_s = a.stall_timeout;
  o.http.backoff_ms = a.backoff_ms;
  o.http.bearer_token = hf_token();
  const bool tty = ::isatty(2);
  // An unreachable or failing hub is reported, not retried in silence.
  o.http.on_retry = [tty](const std::string& url, int failures, int retries, const std::string& problem, int delay_ms) {
    std::fprintf(stderr, "%ssluice: setup: %s: %s; retry %d of %d in %.1f s\n", tty ? "\r\x1b[K" : "", url.c_str(),
                 problem.c_str(), failures, retries, delay_ms / 1000.0);
    std::fflush(stderr);
  };

  double last_line = -1e9;
  std::deque<std::pair<double, uint64_t>> samples;  // (seconds, fetched bytes) over the last 10 s
  auto progress = [&](const SetupProgress& p) {
    samples.emplace_back(p.seconds, p.fetched_bytes);
    while (samples.size() > 2 && samples.front().first < p.seconds - 10) samples.pop_front();
    const double window = p.seconds - samples.front().first;
    const double rate = window > 0.5 ? double(p.fetched_bytes - samples.front().second) / window
                        : p.seconds > 0 ? double(p.fetched_bytes) / p.seconds
                                        : 0;
    const double left = double(p.total_bytes > p.done_bytes ? p.total_bytes - p.done_bytes : 0);
    const double pct = p.total_bytes ? 100.0 * double(p.done_bytes) / double(p.total_bytes) : 100.0;
    std::string line = human_bytes(double(p.done_bytes)) + " of " + human_bytes(double(p.total_bytes)) + " (" +
                       std::to_string(int(pct)) + "%), " + human_bytes(rate) + "/s, ETA " +
                       (left == 0 ? std::string("0s") : rate > 0 ? human_time(left / rate) : std::string("?")) +
                       ", " + std::to_string(p.files_done) + "/" + std::to_string(p.files_total) + " files";
    if (tty) {
      std::fprintf(stderr, "\r\x1b[Ksetup: %s%s", line.c_str(), p.final ? "\n" : "");
    } else if (p.final || p.seconds - last_line >= 5.0) {
      std::fprintf(stderr, "setup: %s\n", line.c_str());
      last_line = p.seconds;
    }
    std::fflush(stderr);
  };
  SetupResult r;
  DrivesSetupResult dr;
  try {
    if (!a.drives.empty()) {
      const std::vector<StripeDrive> drives = drives_with_rates(a.drives);
      int shown = -1;
      dr = run_setup_to_drives(o, drives, a.copies, progress, [&](uint64_t done, uint64_t total) {
        const int pct = total ? int(100 * done / total) : 100;
        if (pct < 100 && shown >= 0 && pct - shown < (tty ? 1 : 10)) return;
        shown = pct;
        std::fprintf(stderr, "%ssetup: experts to the drives: %s of %s (%d%%)%s", tty ? "\r\x1b[K" : "",
                     human_bytes(double(done)).c_str(), human_bytes(double(total)).c_str(), pct, tty ? "" : "\n");
        std::fflush(stderr);
      });
      if (tty) std::fprintf(stderr, "\n");
      r = dr.setup;
    } else {
      r = run_setup(o, progress);
    }
  } catch (const HttpGaveUp& e) {
    throw Error(std::string(e.what()) + " (is " + o.source.hub +
                " reachable? check the network, and --hub or $HF_ENDPOINT; run setup again to resume)");
  }
  std::printf("sluice setup: %s%s%s installed in %s (%s): %d files fetched, %d already complete, %s received\n",
              a.repo.c_str(), r.commit.empty() ? "" : "@", r.commit.substr(0, 12).c_str(), a.dest.c_str(),
              !a.drives.empty() ? "full, experts on the drives" : a.full ? "full" : "stream", r.files_fetched, r.files_skipped, human_bytes(double(r.bytes_fetched)).c_str());
  if (!a.drives.empty()) {
    for (size_t d = 0; d < dr.stripe.drive_bytes.size(); d++)
      std::printf("sluice setup: drive %zu: %s of experts\n", d, human_bytes(double(dr.stripe.drive_bytes[d])).c_str());
    std::printf("sluice setup: experts on %zu drives (%d files written, %d already there), stripe %s; %s\n",
                dr.stripe.drive_bytes.size(), dr.stripe.written, dr.stripe.kept, (a.dest + "/stripe.json").c_str(),
                dr.checked < 0 ? "checked when it was installed"
                : dr.checked == dr.shards
                    ? "every shard's sha256, read through the drives, matches the hub's"
                    : (std::to_string(dr.checked) + " of " + std::to_string(dr.shards) +
                       " shards' sha256, read through the drives, match the hub's (the hub gave no hash for the rest)")
                          .c_str());
  }
  if (a.stream)
    std::printf("sluice setup: %s of experts stay on the server, fetched on first use into %s/.span-cache%s\n",
                human_bytes(double(r.remote_expert_bytes)).c_str(), a.dest.c_str(),
                o.max_cache_bytes ? (" (bounded to " + human_bytes(double(o.max_cache_bytes)) + ")").c_str() : "");
  if (!a.pack.empty()) return pack_spine(a.dest, a.pack, "", a.allow_unknown);
  return 0;
}

Command reg("setup", "Download a checkpoint in full, or set it up to stream experts on demand",
            [](CLI::App& sub, Action* action) {
              auto a = std::make_shared<SetupArgs>();
              sub.add_option("--repo", a->repo, "Repository, ORG/NAME")->required();
              sub.add_option("--revision", a->revision, "Branch, tag or commit (default main)");
              sub.add_option("--hub", a->hub, "Hub URL, or a mirror laid out the same way (default: $HF_ENDPOINT, "
                                              "else https://huggingface.co)");
              sub.add_option("--dest", a->dest, "Model directory to install into")->required();
              sub.add_option("--include", a->include, "Only files matching this glob (repeatable), e.g. '*.json'");
              sub.add_option("--exclude", a->exclude, "Not the files matching this glob (repeatable)");
              sub.add_flag("--full", a->full, "Download every file");
              sub.add_flag("--stream", a->stream, "Download all but the routed experts; fetch those on demand");
              sub.add_option("--max-cache-bytes", a->max_cache, "Stream: bound on the span cache (e.g. 500G; 0 = none)");
              sub.add_option("--jobs", a->jobs, "Files downloaded at once")->check(CLI::Range(1, 64));
              sub.add_option("--connections", a->connections, "Stream: spans fetched at once at run time")
                  ->check(CLI::Range(1, 256));
              sub.add_flag("--skip-space-check", a->skip_space_check, "Do not check free space before starting");
              sub.add_option("--retries", a->retries, "Failed attempts in a row tolerated per request")
                  ->check(CLI::Range(0, 100));
              sub.add_option("--stall-timeout", a->stall_timeout, "Seconds without data before an attempt is retried")
                  ->check(CLI::Range(1, 3600));
              sub.add_option("--backoff-ms", a->backoff_ms, "First retry delay; doubles per failure")
                  ->check(CLI::Range(0, 60000));
              add_allow_unknown_option(sub, a->allow_unknown);
              sub.add_option("--drives", a->drives,
                             "With --full: the routed experts go straight to a stripe over these folders, "
                             "PATH[:WEIGHT],... as `sluice stripe` takes (DEST keeps the header and the spine; no "
                             "full copy on the way)");
              sub.add_option("--copies", a->copies, "With --drives: drives holding each expert (as `sluice stripe`)")
                  ->check(CLI::Range(1, 64));
              sub.add_option("--pack", a->pack, "Then pack the spine: lossless (exact) or int8 (lossy), as `sluice pack`")
                  ->check(CLI::IsMember({"lossless", "int8"}));
              *action = [a] { return run_setup_cmd(*a); };
            });

}  // namespace
}  // namespace sluice::cli
