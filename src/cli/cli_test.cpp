// The sluice binary as a user meets it: --version, short flags, the one size
// parser's messages, progress on stderr, the 1-layer bench, and the RAM budget
// bounding the whole process (the child's peak RSS from wait4).
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

// Under ASan the allocator's shadow memory and quarantine, not sluice, set the
// peak RSS: the budget check is the release build's.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

namespace fs = std::filesystem;

const std::string kNano = std::string(SLUICE_SOURCE_DIR) + "/models/nanok3";

struct Result {
  int status = -1;
  std::string out, err;
  uint64_t peak_rss = 0;  // bytes (ru_maxrss of the child)
};

std::string slurp(const std::string& path) {
  std::string s;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    std::fclose(f);
  }
  return s;
}

// Runs the binary with `args` (no shell); stdout and stderr to files; stdin /dev/null.
Result sluice(const std::vector<std::string>& args) {
  static int seq = 0;
  const std::string base = (fs::temp_directory_path() / ("sluice-cli-test-" + std::to_string(getpid()) + "-" +
                                                         std::to_string(seq++)))
                               .string();
  Result r;
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    std::string bin = SLUICE_BINARY;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (!std::freopen("/dev/null", "r", stdin) || !std::freopen((base + ".out").c_str(), "w", stdout) ||
        !std::freopen((base + ".err").c_str(), "w", stderr))
      _exit(127);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  int st = 0;
  struct rusage ru {};
  if (wait4(pid, &st, 0, &ru) == pid) {
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r.peak_rss = uint64_t(ru.ru_maxrss) * 1024;
  }
  r.out = slurp(base + ".out");
  r.err = slurp(base + ".err");
  fs::remove(base + ".out");
  fs::remove(base + ".err");
  return r;
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("sluice-cli-model-" + std::to_string(getpid()) + "-" +
                                               std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::remove_all(path); }
  ~TempDir() { fs::remove_all(path); }
};

// The first `bytes` bytes of nanoK3's held-out text, as a file in `dir`.
std::string heldout_prefix(const TempDir& dir, size_t bytes) {
  fs::create_directories(dir.path);
  const std::string text = (dir.path / "short.txt").string();
  const std::string held = slurp(kNano + "/heldout.txt");
  FILE* f = std::fopen(text.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + text);
  std::fwrite(held.data(), 1, std::min(held.size(), bytes), f);
  std::fclose(f);
  return text;
}

TEST(Cli, VersionPrintsANumber) {
  Result r = sluice({"--version"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(^sluice \d+\.\d+\.\d+ \(git ([0-9a-f]{7,}|unknown)\)\n$)")))
      << r.out;
}

// --device: cpu always runs and says so; cuda runs on a GPU (a CUDA build on
// a machine with one) or fails with one line naming why.
TEST(Cli, DeviceIsSaidAndCudaIsUsedOrAClearError) {
  Result r = sluice({"run", "-m", kNano, "--tokens", "448,259", "-n", "2", "--ids", "--device", "cpu"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("sluice: device: cpu ("), std::string::npos) << r.err;
  const std::string cpu_out = r.out;
  r = sluice({"run", "-m", kNano, "--tokens", "448,259", "-n", "2", "--ids", "--device", "cuda"});
  if (r.status == 0) {
    EXPECT_NE(r.err.find("sluice: device: cuda: "), std::string::npos) << r.err;
    EXPECT_EQ(r.out, cpu_out);
  } else {
    EXPECT_EQ(r.err.rfind("sluice: --device cuda: ", 0), 0u) << r.err;
  }
  r = sluice({"run", "-m", kNano, "--tokens", "448", "--device", "tpu"});
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.err.rfind("sluice: run: ", 0), 0u) << r.err;
}

// Issue 37: --vram (and the placement flags) are taken by every command that
// opens a model, and ignored with a note on the CPU.
TEST(Cli, VramIsTakenEverywhereAndIgnoredOnTheCpu) {
  for (const char* cmd : {"run", "logits", "bench", "serve", "perplexity"}) {
    Result r = sluice({cmd, "--help"});
    EXPECT_NE(r.out.find("--vram"), std::string::npos) << cmd;
    EXPECT_NE(r.out.find("--gpu-layers"), std::string::npos) << cmd;
    EXPECT_NE(r.out.find("--cpu-moe"), std::string::npos) << cmd;
  }
  Result r = sluice({"run", "-m", kNano, "--tokens", "448,259", "-n", "2", "--ids", "--device", "cpu"});
  const std::string plain = r.out;
  r = sluice({"run", "-m", kNano, "--tokens", "448,259", "-n", "2", "--ids", "--device", "cpu", "--vram", "1G",
              "--gpu-layers", "1", "--cpu-moe"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("sluice: note: --vram, --gpu-layers, --gpu-spill and --cpu-moe are ignored"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, plain);
  r = sluice({"logits", "-m", kNano, "--tokens", "448", "--device", "cpu", "--vram", "lots", "--out", "/dev/null"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--vram"), std::string::npos) << r.err;
}

TEST(Cli, ParserErrorsNameTheCommand) {
  Result r = sluice({"run", "--ctx-size", "0", "-m", kNano});
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.err.rfind("sluice: run: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("--ctx-size"), std::string::npos) << r.err;
  r = sluice({"run", "--no-such-flag"});
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.err.rfind("sluice: run: ", 0), 0u) << r.err;
  r = sluice({"bench", "-m", kNano, "--ram-budget", "12X"});
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.err.rfind("sluice: --ram-budget: unknown size unit", 0), 0u) << r.err;
}

TEST(Cli, BudgetBelowTheMinimumIsRefusedInHumanUnits) {
  Result r = sluice({"run", "-m", kNano, "--ram-budget", "1M", "--tokens", "1,2"});
  EXPECT_NE(r.status, 0);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex(R"(working minimum of [0-9.]+ MiB .*try --ram-budget (\d+)M)")))
      << r.err;
  // The suggested budget works.
  const std::string suggested = m[1].str() + "M";
  r = sluice({"run", "-m", kNano, "--ram-budget", suggested, "--tokens", "448,259,309", "-n", "2", "--ids"});
  EXPECT_EQ(r.status, 0) << r.err;
}

TEST(Cli, ShortFlagsMatchLongOnes) {
  Result a = sluice({"run", "--model", kNano, "--tokens", "448,259,309", "--max-new", "4", "--ids", "--threads", "1",
                     "--ctx-size", "512"});
  Result b = sluice({"run", "-m", kNano, "--tokens", "448,259,309", "-n", "4", "--ids", "-t", "2", "-c", "512"});
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.err.find("memory plan: "), std::string::npos) << a.err;
  EXPECT_NE(a.err.find("up to 512 tokens"), std::string::npos) << a.err;
}

TEST(Cli, ChatOnNanoK3PrintsAnAnswer) {
  Result r = sluice({"run", "-m", kNano, "--chat", "Hello", "-s", "1", "-n", "48"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::string text = r.out;
  text.erase(0, text.find_first_not_of(" \n"));
  EXPECT_GE(text.size(), 10u) << "stdout: '" << r.out << "' stderr: " << r.err;
  // Thinking on (as K3 defaults): reasoning goes to stderr, marked when not a terminal, and can be hidden.
  r = sluice({"run", "-m", kNano, "--chat", "Hello", "--reasoning-effort", "low", "-n", "24", "-s", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("<think>\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("</think>\n"), std::string::npos) << r.err;
  r = sluice({"run", "-m", kNano, "--chat", "Hello", "--reasoning-effort", "low", "-n", "24", "-s", "1",
              "--hide-reasoning"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("<think>"), std::string::npos) << r.err;
}

// A generation_config.json the sampler or the chat would refuse is refused
// naming the file, before anything loads.
TEST(Cli, GenerationConfigOutOfRangeNamesTheFile) {
  TempDir t;
  fs::create_directories(t.path);
  const std::string file = (t.path / "generation_config.json").string();
  for (const auto& [json, problem] : std::vector<std::pair<std::string, std::string>>{
           {R"({"top_p": 0})", "top_p"},
           {R"({"top_p": 1e-50})", "top_p"},
           {R"({"top_p": 1.5})", "top_p"},
           {R"({"temperature": 1e39})", "temperature"},
           {R"({"reasoning_effort": "extreme"})", "reasoning_effort"},
       }) {
    FILE* f = std::fopen(file.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs(json.c_str(), f);
    std::fclose(f);
    Result r = sluice({"run", "-m", t.path.string(), "--chat", "Hello"});
    EXPECT_NE(r.status, 0) << json;
    EXPECT_NE(r.err.find(file + ": " + problem), std::string::npos) << json << " -> " << r.err;
  }
}

TEST(Cli, ProgressOnStderr) {
  // A prompt of several chunks (-b 4): prefill progress lines; stdout holds only the ids.
  Result r = sluice({"run", "-m", kNano, "--tokens", "448,259,309,412,370,399,335,283,72,307", "-b", "4", "-n", "2",
                     "--ids"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("sluice: prefill: 10 of 10 tokens (100%)"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  // The same ids as one chunk.
  Result one = sluice({"run", "-m", kNano, "--tokens", "448,259,309,412,370,399,335,283,72,307", "-n", "2", "--ids"});
  EXPECT_EQ(one.out, r.out);
  // perplexity over a short text (the first 1500 bytes of the held-out file), in windows of 64.
  TempDir dir;
  const std::string text = heldout_prefix(dir, 1500);
  r = sluice({"perplexity", "-m", kNano, "-f", text, "--ctx", "64"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex(R"(sluice: perplexity: (\d+) of \1 tokens \(100%\))"))) << r.err;
  EXPECT_NE(r.err.find("sluice: loading spine: "), std::string::npos) << r.err;
}

// A mistyped command names itself and the nearest one, not "A subcommand is required".
TEST(Cli, UnknownCommandSuggestsTheNearest) {
  Result r = sluice({"runn", "-m", kNano});
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.err, "sluice: unknown command 'runn' (did you mean run?)\n");
  r = sluice({"tokenzie"});
  EXPECT_EQ(r.err, "sluice: unknown command 'tokenzie' (did you mean tokenize?)\n");
  r = sluice({"frobnicate"});
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.err.rfind("sluice: unknown command 'frobnicate' (commands: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("serve"), std::string::npos) << r.err;
}

// -m/--model on every command that takes a model; --ram-budget on plan too.
TEST(Cli, ModelFlagIsTheSameEverywhere) {
  const std::string tiny = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model";
  Result r = sluice({"verify", "-m", tiny});
  EXPECT_EQ(r.status, 0) << r.err << r.out;
  TempDir dir;
  fs::create_directories(dir.path);
  const std::string pack = (dir.path / "spine.int8.pack").string();
  r = sluice({"pack", "-m", tiny, "--spine", "int8", "--out", pack});
  EXPECT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(fs::exists(pack));
  r = sluice({"tokenize", "-m", kNano, "--text", "Hello"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::string ids = r.out;
  while (!ids.empty() && ids.back() == '\n') ids.pop_back();
  r = sluice({"detokenize", "-m", kNano, "--ids", ids});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("Hello"), std::string::npos) << r.out;
  r = sluice({"plan", "-m", tiny, "--ram-budget", "1G", "--disk-gbps", "1", "--probe-seconds", "0.05", "--probe-rounds", "1"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("budget       1.074 GB"), std::string::npos) << r.out;
  // cache-sim's -m needs its text: the parser knows -m.
  r = sluice({"cache-sim", "-m", kNano});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--text-file"), std::string::npos) << r.err;
}

// Usage errors come before the spine loads: no memory plan, no load progress.
TEST(Cli, UsageErrorsComeBeforeTheModelLoads) {
  // run with nothing to say (stdin is /dev/null).
  Result r = sluice({"run", "-m", kNano});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("sluice: run: give --tokens, --prompt or --chat"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("memory plan"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("loading spine"), std::string::npos) << r.err;
  r = sluice({"run", "-m", kNano, "--chat", "Hi", "--temperature", "-1"});
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.err.find("memory plan"), std::string::npos) << r.err;
  // serve with a broken tokenizer: said before the model opens.
  TempDir dir;
  fs::create_directories(dir.path);
  for (const auto& e : fs::directory_iterator(kNano))
    if (e.path().filename() != "tiktoken.model") fs::create_symlink(e.path(), dir.path / e.path().filename());
  FILE* f = std::fopen((dir.path / "tiktoken.model").c_str(), "wb");
  ASSERT_TRUE(f);
  std::fputs("not base64 at all\n", f);
  std::fclose(f);
  r = sluice({"serve", "-m", dir.path.string(), "--port", "0"});
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.err.find("memory plan"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tiktoken.model"), std::string::npos) << r.err;
}

// cache-sim over a model's routing shows the spine loading and the pass over
// the text (it ran silent for over a minute on a large model), and with
// --prefetch-tokens the decode; the tables stay on stdout.
TEST(Cli, CacheSimOverAModelShowsProgress) {
  TempDir dir;
  const std::string text = heldout_prefix(dir, 600);
  Result r = sluice({"cache-sim", "--model", kNano, "--text-file", text, "--budgets", "10,50"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("sluice: loading spine: "), std::string::npos) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex(R"(sluice: routing: (\d+) of \1 tokens \(100%\))"))) << r.err;
  EXPECT_NE(r.out.find("budget%"), std::string::npos) << r.out;
  Result p = sluice({"cache-sim", "--model", kNano, "--text-file", text, "--prefetch-tokens", "8"});
  ASSERT_EQ(p.status, 0) << p.err;
  EXPECT_NE(p.err.find("sluice: decode: 8 of 8 tokens (100%)"), std::string::npos) << p.err;
}

// A tiny model with one (dense, MLA) layer in `dir`; "" (and a test failure) if make-model fails.
std::string one_layer_model(const TempDir& dir) {
  const std::string out = (dir.path / "one").string();
  Result m = sluice({"make-model", "--preset", "tiny", "--layers", "1", "--mla-layers", "1", "--shards", "1", "--seed",
                     "5", "--out", out});
  EXPECT_EQ(m.status, 0) << m.err << m.out;
  return m.status == 0 ? out : "";
}

// A model with one (dense) layer crashed bench (vector::_M_range_check).
TEST(Cli, BenchOnOneLayerModels) {
  TempDir dir;
  const std::string out = one_layer_model(dir);
  ASSERT_FALSE(out.empty());
  Result r = sluice({"bench", "-m", out, "-p", "8", "-n", "3", "--probe-seconds", "0.1", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["decode_steps_s"].size(), 3u);
  EXPECT_NE(r.err.find("sluice: decode: 3 of 3 steps (100%)"), std::string::npos) << r.err;
}

// Without --json bench prints a short table for a person (a header naming the
// headline figures, a rule, one row), not the record; --json keeps the record.
TEST(Cli, BenchPrintsATableUnlessJson) {
  TempDir dir;
  const std::string out = one_layer_model(dir);
  ASSERT_FALSE(out.empty());
  Result r = sluice({"bench", "-m", out, "-p", "8", "-n", "3", "--probe-seconds", "0.1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(nlohmann::json::accept(r.out)) << r.out;
  std::vector<std::string> lines;
  for (size_t at = 0, nl; (nl = r.out.find('\n', at)) != std::string::npos; at = nl + 1)
    lines.push_back(r.out.substr(at, nl - at));
  ASSERT_EQ(lines.size(), 3u) << r.out;
  for (const char* col : {"| model", "prefill tok/s", "decode s/token", "io_efficiency", "step_over_floor"})
    EXPECT_NE(lines[0].find(col), std::string::npos) << col << "\n" << r.out;
  EXPECT_TRUE(std::regex_match(lines[1], std::regex(R"((\| -+ )+\|)"))) << lines[1];
  EXPECT_EQ(lines[2].rfind("| one ", 0), 0u) << lines[2];
  EXPECT_NE(r.err.find("--json"), std::string::npos) << r.err;
  Result rows = sluice({"bench", "-m", out, "-p", "4", "-n", "3", "--rows", "1,2"});
  ASSERT_EQ(rows.status, 0) << rows.err;
  EXPECT_NE(rows.out.find("| sequences"), std::string::npos) << rows.out;
  EXPECT_FALSE(nlohmann::json::accept(rows.out)) << rows.out;
  Result rj = sluice({"bench", "-m", out, "-p", "4", "-n", "3", "--rows", "1,2", "--json"});
  ASSERT_EQ(rj.status, 0) << rj.err;
  EXPECT_EQ(nlohmann::json::parse(rj.out)["rows"].size(), 2u) << rj.out;
}

// --ram-budget bounds the whole process: the child's peak RSS stays within it,
// for `run` and for `bench` (its probe and replay buffers included), at a budget
// that makes the engine stream the spine.
TEST(Cli, PeakRssStaysWithinTheBudget) {
  TempDir dir;
  const std::string model = (dir.path / "m").string();
  Result m = sluice({"make-model", "--preset", "tiny", "--seed", "7", "--layers", "6", "--experts", "64", "--hidden",
                     "256", "--moe-inter", "256", "--latent", "128", "--dense-inter", "1024", "--vocab", "4352",
                     "--out", model});
  ASSERT_EQ(m.status, 0) << m.err << m.out;
  uint64_t model_bytes = 0;
  for (const auto& e : fs::directory_iterator(model))
    if (e.path().extension() == ".safetensors") model_bytes += fs::file_size(e.path());
  // The working minimum, from the refusal.
  Result low = sluice({"run", "-m", model, "--ram-budget", "1M", "--tokens", "1,2"});
  std::smatch sm;
  ASSERT_TRUE(std::regex_search(low.err, sm, std::regex(R"(try --ram-budget (\d+)M)"))) << low.err;
  const uint64_t minimum_mib = std::stoull(sm[1].str());
  for (uint64_t budget_mib : {minimum_mib + 1, minimum_mib + 8}) {
    const std::string budget = std::to_string(budget_mib) + "M";
    const uint64_t limit = budget_mib << 20;
    Result r = sluice({"run", "-m", model, "--ram-budget", budget, "--tokens", "5,6,7,8,9,10,11,12", "-n", "16",
                       "--ids"});
    ASSERT_EQ(r.status, 0) << r.err;
    if (!kSanitized) {
      EXPECT_LE(r.peak_rss, limit) << "run at " << budget << ": peak " << r.peak_rss << "\n" << r.err;
    }
    Result b = sluice({"bench", "-m", model, "--ram-budget", budget, "-p", "32", "-n", "4", "--probe-seconds", "0.2",
                       "--json"});
    ASSERT_EQ(b.status, 0) << b.err;
    if (!kSanitized) {
      EXPECT_LE(b.peak_rss, limit) << "bench at " << budget << ": peak " << b.peak_rss << "\n" << b.err;
    }
    nlohmann::json j = nlohmann::json::parse(b.out);
    EXPECT_LT(j["spine_bytes"]["resident"].get<uint64_t>(), model_bytes);  // the budget bit
  }
}

}  // namespace
