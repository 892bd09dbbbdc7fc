// A compact version of the hostile-input audit: each family of corruption is
// applied to a copy of the fixture model, and `sluice run` on it must exit
// non-zero with exactly one clean line ("sluice: ...", no control characters)
// naming the damaged file, within a time and memory bound — never a hang, a
// crash, a bare std::bad_alloc or a library's exception text.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;
const std::string kFixture = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model";
const char* const kShard = "model-00002-of-00003.safetensors";

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void put(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}
void replace_first(std::string& s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  s.replace(at, from.size(), to);
}

// Rewrites a shard's JSON header through `edit`, fixing up the length prefix.
void edit_header(const fs::path& shard, const std::function<void(std::string&)>& edit) {
  std::string bytes = slurp(shard);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  std::string header = bytes.substr(8, n), data = bytes.substr(8 + n);
  edit(header);
  std::string len(8, '\0');
  for (int i = 0; i < 8; i++) len[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  put(shard, len + header + data);
}

struct Outcome {
  int status = -1;  // exit code, or 128 + signal
  std::string err;
  double seconds = 0;
  long max_rss_kb = 0;
};

Outcome run_sluice(const fs::path& model, const fs::path& scratch) {
  const std::string err_path = (scratch / "stderr.txt").string();
  const std::string m = model.string();
  std::vector<const char*> argv = {SLUICE_BINARY, "run", "--model", m.c_str(), "--prompt", "Once", "--max-new",
                                   "2", "--ram-budget", "64M", nullptr};
  const auto t0 = std::chrono::steady_clock::now();
  // fork, not posix_spawn: a vfork-style child runs in this process's memory
  // until exec, and the kernel then counts this process's peak RSS (e.g. an
  // earlier test's gigabytes) as the child's ru_maxrss. A forked child
  // starts from this process's current RSS (small) instead.
  const pid_t pid = fork();
  if (pid == 0) {
    const int in = ::open("/dev/null", O_RDONLY), out = ::open("/dev/null", O_WRONLY),
              err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(127);
    execv(SLUICE_BINARY, const_cast<char**>(argv.data()));
    _exit(127);
  }
  Outcome o;
  if (pid < 0) return o;
  int status = 0;
  struct rusage ru {};
  for (;;) {
    const pid_t w = wait4(pid, &status, WNOHANG, &ru);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(30)) {
      ::kill(pid, SIGKILL);
      wait4(pid, &status, 0, &ru);
      o.err = "(killed after 30 s) ";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  o.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  o.max_rss_kb = ru.ru_maxrss;
  o.err += slurp(err_path);
  return o;
}

struct Case {
  std::string name;
  std::string file;  // what the one line must name
  std::function<void(const fs::path& dir)> damage;
};

std::vector<Case> cases() {
  const std::string shard = kShard;
  auto header = [shard](std::function<void(std::string&)> f) {
    return [shard, f](const fs::path& d) { edit_header(d / shard, f); };
  };
  auto file_edit = [](std::string file, std::function<void(std::string&)> f) {
    return [file, f](const fs::path& d) {
      std::string s = slurp(d / file);
      f(s);
      put(d / file, s);
    };
  };
  auto fifo = [](std::string file) {
    return [file](const fs::path& d) {
      fs::remove(d / file);
      ASSERT_EQ(::mkfifo((d / file).c_str(), 0644), 0);
    };
  };
  auto directory = [](std::string file) {
    return [file](const fs::path& d) {
      fs::remove(d / file);
      fs::create_directory(d / file);
    };
  };
  return {
      {"shard truncated", shard, [shard](const fs::path& d) { fs::resize_file(d / shard, fs::file_size(d / shard) / 2); }},
      {"shard padded", shard, [shard](const fs::path& d) { fs::resize_file(d / shard, fs::file_size(d / shard) + 4096); }},
      {"shard shorter than its length prefix", shard, [shard](const fs::path& d) { fs::resize_file(d / shard, 5); }},
      {"header length huge", shard, file_edit(shard, [](std::string& s) { s[6] = char(0x7f); })},
      {"header length short", shard, file_edit(shard, [](std::string& s) { s[0] = char(uint8_t(s[0]) - 1); })},
      {"dtype lie", shard, header([](std::string& h) { replace_first(h, "\"BF16\"", "\"F16\" "); })},
      {"shape lie", shard, header([](std::string& h) { replace_first(h, "\"shape\":[", "\"shape\":[3,"); })},
      {"overlapping tensors", shard, header([](std::string& h) {
         const size_t a = h.find("\"data_offsets\":[", h.find("\"data_offsets\":[") + 1);
         ASSERT_NE(a, std::string::npos);
         const size_t b = a + 16, comma = h.find(',', b);
         h.replace(b, comma - b, "0");
       })},
      {"tensor name with control characters", shard,
       header([](std::string& h) { replace_first(h, "\"language_model.", "\"x\\nsecond line\\u001b[31mRED.language_model."); })},
      {"header nesting bomb", shard, header([](std::string& h) { h = std::string(1 << 20, '['); })},
      {"index not JSON", "model.safetensors.index.json",
       file_edit("model.safetensors.index.json", [](std::string& s) { s.resize(s.size() / 2); })},
      {"index nesting bomb", "model.safetensors.index.json",
       file_edit("model.safetensors.index.json", [](std::string& s) { s = std::string(4 << 20, '['); })},
      {"index names a missing shard", "model-00009-of-00009.safetensors",
       file_edit("model.safetensors.index.json",
                 [](std::string& s) { replace_first(s, "model-00001-of-00003", "model-00009-of-00009"); })},
      {"index is a directory", "model.safetensors.index.json", directory("model.safetensors.index.json")},
      {"config not JSON", "config.json", file_edit("config.json", [](std::string& s) { s.insert(0, "{,"); })},
      {"config 1e8 layers", "config.json",
       file_edit("config.json", [](std::string& s) { replace_first(s, "\"num_hidden_layers\": 10", "\"num_hidden_layers\": 100000000"); })},
      {"config 1e8 experts", "config.json",
       file_edit("config.json", [](std::string& s) { replace_first(s, "\"num_experts\": 32", "\"num_experts\": 100000000"); })},
      {"config 60000 experts", "config.json",
       file_edit("config.json", [](std::string& s) { replace_first(s, "\"num_experts\": 32", "\"num_experts\": 60000"); })},
      {"config layer id 2^32+1", "config.json",
       file_edit("config.json", [](std::string& s) { replace_first(s, "\"kda_layers\": [", "\"kda_layers\": [4294967297, "); })},
      {"config is a FIFO", "config.json", fifo("config.json")},
      {"config is a directory", "config.json", directory("config.json")},
      {"tiktoken is a FIFO", "tiktoken.model", fifo("tiktoken.model")},
      {"tiktoken garbage line", "tiktoken.model",
       file_edit("tiktoken.model", [](std::string& s) { s += "!!! not base64 ###\n"; })},
      {"tiktoken absurd rank", "tiktoken.model",
       file_edit("tiktoken.model", [](std::string& s) { s += "QUJD 9999999999\n"; })},
      {"tokenizer config not JSON", "tokenizer_config.json",
       file_edit("tokenizer_config.json", [](std::string& s) { s.resize(s.size() - 3); })},
  };
}

TEST(HostileModel, EveryCorruptionGivesOneCleanLineNamingTheFile) {
  const fs::path root = fs::path(SLUICE_BINARY).parent_path() / "hostile-model-test";
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    fs::remove_all(root);
    fs::create_directories(root);
    const fs::path dir = root / "model";
    fs::copy(kFixture, dir);
    c.damage(dir);
    if (::testing::Test::HasFatalFailure()) return;
    const Outcome o = run_sluice(dir, root);
    EXPECT_NE(o.status, 0);
    EXPECT_LT(o.status, 128) << "killed by a signal: " << o.err;
    EXPECT_LT(o.seconds, 20.0);
    EXPECT_LT(o.max_rss_kb, 1L << 20) << "peak RSS over 1 GiB";
    ASSERT_FALSE(o.err.empty());
    EXPECT_EQ(o.err.find('\n'), o.err.size() - 1) << "not exactly one line: " << o.err;
    EXPECT_EQ(o.err.rfind("sluice: ", 0), 0u) << o.err;
    EXPECT_NE(o.err.find(c.file), std::string::npos) << o.err;
    for (char ch : o.err.substr(0, o.err.size() - 1))
      EXPECT_FALSE((unsigned char)ch < 0x20 || ch == 0x7f) << "control character in: " << o.err;
    EXPECT_EQ(o.err.find("json.exception"), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find("bad_alloc"), std::string::npos) << o.err;
  }
  fs::remove_all(root);
}

}  // namespace
