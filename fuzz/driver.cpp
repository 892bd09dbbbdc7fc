// fuzz/driver.cpp — a deterministic mutation loop around a libFuzzer harness,
// for toolchains without -fsanitize=fuzzer (g++). Not coverage guided: it runs
// every seed, then mutations of the seeds (bit flips, interesting bytes and
// numbers, JSON/XTML tokens, cuts, copies, splices) drawn from a fixed-seed
// generator, so a run of N executions is reproducible. A crash is the
// sanitizer's report or an uncaught exception; the input that caused it is
// written to ./crash-driver-current first when SLUICE_FUZZ_SAVE_EVERY is set.
//
//   fuzz_<target> [-max_total_time=S] [-runs=N] [-max_len=B] CORPUS_DIR...
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n ? size_t(next() % n) : 0; }
};

const char* const kTokens[] = {
    "{", "}", "[", "]", "\"", ":", ",", "null", "true", "false", "0", "-1", "1e999", "-0.0",
    "4294967297", "18446744073709551616", "9223372036854775807", "\\u0000", "\\ud800", "\xff", "\xc3",
    "\n", "\x1b[31m", "<|open|>", "<|close|>", "<|sep|>", "tools", "call", "argument", "json",
    " key=\"", " type=\"string\"", "<|end_of_msg|>", "[EOS]", "../", ".partial/", "=====",
    "\"dtype\":\"BF16\"", "\"shape\":[", "\"data_offsets\":[", "\"role\":\"tool\"", "\"messages\":[",
};

void mutate(std::string& s, const std::vector<std::string>& corpus, Rng& r, size_t max_len) {
  const int n = 1 + int(r.below(4));
  for (int k = 0; k < n; k++) {
    const size_t at = r.below(s.size() + 1);
    switch (r.below(8)) {
      case 0:
        if (!s.empty()) s[r.below(s.size())] ^= char(1u << r.below(8));
        break;
      case 1:
        if (!s.empty()) {
          static const char kBytes[] = {0, 1, 0x7f, char(0x80), char(0xff), '0', '9', '"', '\\', ' '};
          s[r.below(s.size())] = kBytes[r.below(sizeof kBytes)];
        }
        break;
      case 2: s.insert(at, 1, char(r.next())); break;
      case 3: s.insert(at, kTokens[r.below(sizeof kTokens / sizeof *kTokens)]); break;
      case 4:
        if (!s.empty()) s.erase(at == s.size() ? at - 1 : at, 1 + r.below(16));
        break;
      case 5:
        if (!s.empty()) {  // copy a piece elsewhere
          const size_t b = r.below(s.size()), len = 1 + r.below(std::min<size_t>(64, s.size() - b));
          s.insert(at, s.substr(b, len));
        }
        break;
      case 6:
        if (!corpus.empty()) {  // splice with another input
          const std::string& o = corpus[r.below(corpus.size())];
          s = s.substr(0, at) + o.substr(std::min(o.size(), r.below(o.size() + 1)));
        }
        break;
      default:
        if (!s.empty()) s.resize(r.below(s.size()));
        break;
    }
  }
  if (s.size() > max_len) s.resize(max_len);
}

void run(const std::string& in, uint64_t n) {
  // Saved first: if this input kills the process, it is on disk.
  if (std::getenv("SLUICE_FUZZ_SAVE_EVERY")) {
    std::ofstream("crash-driver-current", std::ios::binary).write(in.data(), std::streamsize(in.size()));
  }
  (void)n;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(in.data()), in.size());
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 10;
  uint64_t runs = UINT64_MAX;
  size_t max_len = 64 << 10;
  std::vector<std::string> corpus;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a.rfind("-max_total_time=", 0) == 0) seconds = std::atof(a.c_str() + 16);
    else if (a.rfind("-runs=", 0) == 0) runs = std::strtoull(a.c_str() + 6, nullptr, 10);
    else if (a.rfind("-max_len=", 0) == 0) max_len = std::strtoull(a.c_str() + 9, nullptr, 10);
    else if (a.rfind("-", 0) == 0) continue;  // other libFuzzer flags: ignored
    else if (std::filesystem::is_directory(a)) {
      std::vector<std::filesystem::path> files;
      for (auto& e : std::filesystem::directory_iterator(a))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (auto& p : files) {
        std::ifstream f(p, std::ios::binary);
        corpus.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
      }
    } else {  // a single input: run it once (reproducing a crash)
      std::ifstream f(a, std::ios::binary);
      std::string in((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      run(in, 0);
      std::printf("driver: ran %s\n", a.c_str());
      return 0;
    }
  }
  if (corpus.empty()) corpus.push_back("");
  const auto start = std::chrono::steady_clock::now();
  uint64_t n = 0;
  for (const std::string& s : corpus) run(s, n++);
  Rng r{0x5111CEull};
  while (n < runs) {
    if ((n & 63) == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= seconds)
      break;
    std::string s = corpus[r.below(corpus.size())];
    mutate(s, corpus, r, max_len);
    run(s, n++);
  }
  std::printf("Done %llu runs in %.0f second(s) (deterministic driver)\n", (unsigned long long)n,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}
