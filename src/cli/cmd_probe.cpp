// cli/cmd_probe.cpp — `sluice probe`: the O_DIRECT read ceiling of a disk.
//
// Reads random aligned spans (default: one K3 expert, 17,547,264 bytes) of the
// given files, or of a scratch file it writes and deletes, at each queue depth
// asked for, and prints GB/s per depth (one JSON object per line with --json).
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/model_args.h"
#include "io/bandwidth_probe.h"
#include "io/depth_profile.h"

namespace sluice::cli {
namespace {

struct ProbeArgs {
  std::vector<std::string> files;
  std::string make_file;
  double make_gb = 6;
  bool keep = false;
  uint64_t read_bytes = 17547264;
  std::vector<int> depths = {1, 4, 16, 32};
  uint64_t chunk_bytes = 4ull << 20;
  double seconds = 5;
  double budget_gb = 8;
  bool json = false;
  bool save = false;  // record the chosen depth for this disk (io/depth_profile.h)
  int rounds = 0;     // passes over the depths; 0: 1, or 3 with --save
};

int run_probe(const ProbeArgs& a) {
  std::vector<std::string> files = a.files;
  bool made = false;
  if (!a.make_file.empty()) {
    write_probe_file(a.make_file, uint64_t(a.make_gb * 1e9));
    files.push_back(a.make_file);
    made = true;
  }
  struct Cleanup {
    std::string path;
    ~Cleanup() {
      if (!path.empty()) std::filesystem::remove(path);
    }
  } cleanup{made && !a.keep ? a.make_file : std::string()};
  const std::string device = device_of(files.front());

  // Rounds go over every depth in turn, so a disk whose rate drifts from
  // minute to minute drifts for every depth alike (see choose_depth).
  DepthRounds gbps;
  const int rounds = a.rounds > 0 ? a.rounds : a.save ? 3 : 1;
  for (int round = 0; round < rounds; round++) {
    for (int qd : a.depths) {
      ProbeOptions o;
      o.read_bytes = a.read_bytes;
      o.budget_bytes = uint64_t(a.budget_gb * 1e9);
      o.max_seconds = a.seconds;
      o.reader.queue_depth = qd;
      o.reader.chunk_bytes = a.chunk_bytes;
      ProbeResult r = measure_read_ceiling(files, o);
      gbps[qd].push_back(r.gbps);
      if (a.json)
        std::printf(
            "{\"queue_depth\":%d,\"round\":%d,\"chunk_bytes\":%llu,\"read_bytes\":%llu,\"gbps\":%.3f,"
            "\"bytes\":%llu,\"reads\":%llu,\"seconds\":%.3f,\"io_uring\":%s,\"direct\":%s}\n",
            qd, round + 1, (unsigned long long)a.chunk_bytes, (unsigned long long)a.read_bytes, r.gbps,
            (unsigned long long)r.bytes, (unsigned long long)r.reads, r.seconds,
            r.io_uring ? "true" : "false", r.direct ? "true" : "false");
      else
        std::printf("qd %3d  %6.2f GB/s  (%llu reads of %llu B in %.2f s, chunk %llu B, %s, %s)\n", qd,
                    r.gbps, (unsigned long long)r.reads, (unsigned long long)a.read_bytes, r.seconds,
                    (unsigned long long)a.chunk_bytes, r.io_uring ? "io_uring" : "pread threads",
                    r.direct ? "O_DIRECT" : "buffered: not a device ceiling");
      std::fflush(stdout);
    }
  }
  if (a.save) {
    const std::string path = depth_profile_path();
    const int qd = save_depth_profile(path, device, gbps);
    std::fprintf(stderr, "saved queue depth %d for device %s in %s (models on it read at that depth)\n", qd,
                 device.c_str(), path.c_str());
  }
  return 0;
}

Command reg("probe", "Measure the O_DIRECT read bandwidth ceiling of files or a scratch file",
            [](CLI::App& sub, Action* act) {
              auto a = std::make_shared<ProbeArgs>();
              sub.add_option("--file", a->files, "Files to read (e.g. a model's shards)");
              sub.add_option("--make-file", a->make_file,
                             "Write a scratch file here, probe it, delete it");
              sub.add_option("--make-gb", a->make_gb, "Size of the scratch file in GB");
              sub.add_flag("--keep", a->keep, "Keep the scratch file");
              sub.add_option("--read-bytes", a->read_bytes, "Bytes per read (one span), e.g. 16M")
                  ->transform(byte_size("--read-bytes"));
              sub.add_option("--qd", a->depths, "Queue depths to measure")->delimiter(',');
              sub.add_option("--chunk-bytes", a->chunk_bytes, "Split each read into chunks of this size, e.g. 4M (0: never)")
                  ->transform(byte_size("--chunk-bytes", /*allow_zero=*/true));
              sub.add_option("--seconds", a->seconds, "Time limit per queue depth");
              sub.add_option("--budget-gb", a->budget_gb, "Byte limit per queue depth in GB");
              sub.add_flag("--json", a->json, "One JSON object per queue depth");
              sub.add_option("--rounds", a->rounds, "Passes over all the depths (default 1, or 3 with --save)")
                  ->check(CLI::Range(1, 100));
              sub.add_flag("--save", a->save,
                           "Record a depth for this disk that the engine reads at when --queue-depth is not "
                           "given: 16 unless a depth beats it in every round (io/depth_profile.h)");
              *act = [a] {
                if (a->files.empty() && a->make_file.empty())
                  throw Error("probe: give --file or --make-file");
                return run_probe(*a);
              };
            });

}  // namespace
}  // namespace sluice::cli
