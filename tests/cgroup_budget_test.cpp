// In a container's memory limit without --ram-budget: `run` and `serve` on
// nanoK3 plan within the limit (3/4 of it, k3/model.h default_ram_budget) and
// are not killed. Each child is moved into a fresh 256 MiB memory cgroup
// (v1: memory.limit_in_bytes, v2: memory.max) before it execs sluice. Needs
// a cgroup this process may create (root, a writable cgroup mount); skipped,
// saying why, where there is none.
#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const std::string kNano = std::string(SLUICE_SOURCE_DIR) + "/models/nanok3";
constexpr uint64_t kLimit = 256ull << 20;

bool write_file(const std::string& path, const std::string& text, std::string* why) {
  std::ofstream f(path);
  f << text;
  f.flush();
  if (f) return true;
  *why = path + ": " + std::strerror(errno);
  return false;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// This process's cgroup path in the hierarchy whose /proc/self/cgroup line matches.
std::string own_path(bool v2) {
  std::ifstream f("/proc/self/cgroup");
  for (std::string line; std::getline(f, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    if (v2 ? line.rfind("0::", 0) == 0 : ("," + controllers + ",").find(",memory,") != std::string::npos)
      return line.substr(b + 1);
  }
  return "";
}

// A memory cgroup of kLimit below this process's own (v1) or at the v2 root's level.
struct MemoryCgroup {
  std::string dir, why_not;
  MemoryCgroup() {
    const std::string name = "sluice-test-" + std::to_string(getpid());
    std::string v1 = "/sys/fs/cgroup/memory";
    if (fs::exists(v1 + "/memory.limit_in_bytes")) {
      std::string parent = v1 + own_path(false);
      if (!fs::exists(parent + "/memory.limit_in_bytes")) parent = v1;  // inside a container: its root
      make(parent + "/" + name, "memory.limit_in_bytes");
      return;
    }
    const std::string v2 = "/sys/fs/cgroup";
    if (slurp(v2 + "/cgroup.controllers").find("memory") == std::string::npos) {
      why_not = "no cgroup v1 memory controller and no v2 memory controller at " + v2;
      return;
    }
    std::string parent = v2 + own_path(true);
    if (parent.back() == '/') parent.pop_back();
    if (slurp(parent + "/cgroup.subtree_control").find("memory") == std::string::npos) {
      why_not = parent + ": the memory controller is not enabled for its children";
      return;
    }
    make(parent + "/" + name, "memory.max");
  }
  void make(const std::string& path, const std::string& limit_file) {
    std::error_code ec;
    if (!fs::create_directory(path, ec)) {
      why_not = "cannot create " + path + ": " + ec.message();
      return;
    }
    dir = path;
    if (!write_file(path + "/" + limit_file, std::to_string(kLimit), &why_not)) dir.clear(), fs::remove(path, ec);
  }
  ~MemoryCgroup() {
    if (dir.empty()) return;
    for (int i = 0; i < 50 && rmdir(dir.c_str()) != 0 && errno == EBUSY; i++) usleep(100 * 1000);
  }
};

struct Child {
  pid_t pid = -1;
  int out = -1;  // stdout, a pipe
  std::string err_path;
};

// Forks; the child joins `cgroup`, sends stdout to a pipe and stderr to a file, execs sluice.
Child start(const MemoryCgroup& cg, const std::vector<std::string>& args) {
  Child c;
  c.err_path = (fs::temp_directory_path() / ("sluice-cgroup-" + std::to_string(getpid()) + ".err")).string();
  int p[2];
  if (pipe(p) != 0) return c;
  c.pid = fork();
  if (c.pid == 0) {
    const std::string me = std::to_string(getpid());
    std::ofstream(cg.dir + "/cgroup.procs") << me << std::flush;
    std::vector<std::string> copy = args;
    std::vector<char*> argv;
    std::string bin = SLUICE_BINARY;
    argv.push_back(bin.data());
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    dup2(p[1], 1);
    close(p[0]);
    if (!std::freopen("/dev/null", "r", stdin) || !std::freopen(c.err_path.c_str(), "w", stderr)) _exit(127);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  close(p[1]);
  c.out = p[0];
  return c;
}

// The number after `key` in `text`, or -1. (No std::regex in this file: it trips
// GCC 12's -Wmaybe-uninitialized under the sanitizers.)
double number_after(const std::string& text, const std::string& key) {
  const size_t at = text.find(key);
  return at == std::string::npos ? -1 : std::atof(text.c_str() + at + key.size());
}

// Reads the child's stdout until `done(text)` or it closes (60 s at most).
std::string read_until(int fd, const std::function<bool(const std::string&)>& done) {
  std::string text;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < end) {
    pollfd pf{fd, POLLIN, 0};
    if (poll(&pf, 1, 200) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, size_t(n));
    if (done(text)) break;
  }
  return text;
}

int wait_status(pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// The memory plan's budget line says the cgroup's limit was the basis, and is within it.
void expect_budget_within_limit(const std::string& err) {
  EXPECT_NE(err.find("no --ram-budget: 3/4 of the cgroup memory limit 256 MiB"), std::string::npos) << err;
  const double budget_mib = number_after(err, "memory plan: budget ");
  ASSERT_GT(budget_mib, 0) << err;
  EXPECT_LE(budget_mib, 256.0 * 3 / 4 + 0.5) << err;
}

TEST(CgroupBudget, RunAndServeOnNanoK3PlanWithinA256MiBLimit) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan's shadow memory is outside any budget: the release build checks the limit";
#endif
  MemoryCgroup cg;
  if (cg.dir.empty()) GTEST_SKIP() << "no memory cgroup to test in: " << cg.why_not;

  Child run = start(cg, {"run", "-m", kNano, "--tokens", "448,259,309", "-n", "4", "--ids", "--device", "cpu"});
  ASSERT_GT(run.pid, 0);
  const std::string out = read_until(run.out, [](const std::string& t) { return !t.empty() && t.back() == '\n'; });
  close(run.out);
  EXPECT_EQ(wait_status(run.pid), 0) << slurp(run.err_path);  // 137: killed at the limit
  EXPECT_FALSE(out.empty());
  expect_budget_within_limit(slurp(run.err_path));

  Child serve = start(cg, {"serve", "-m", kNano, "--port", "0", "--device", "cpu"});
  ASSERT_GT(serve.pid, 0);
  const std::string listening = "listening on http://127.0.0.1:";
  const std::string said = read_until(serve.out, [&](const std::string& t) {
    const size_t at = t.find(listening);
    return at != std::string::npos && t.find("/v1", at) != std::string::npos;
  });
  const int port = int(number_after(said, listening));
  if (port <= 0) {
    kill(serve.pid, SIGKILL);
    wait_status(serve.pid);
    FAIL() << "serve never listened: " << said << slurp(serve.err_path);
  }
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120);
  auto res = client.Post("/v1/chat/completions",
                         R"({"model":"nanok3","messages":[{"role":"user","content":"Hello"}],"max_tokens":8})", "application/json");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200) << res->body;
  kill(serve.pid, SIGTERM);
  close(serve.out);
  EXPECT_EQ(wait_status(serve.pid), 0) << slurp(serve.err_path);
  expect_budget_within_limit(slurp(serve.err_path));
  fs::remove(run.err_path);
}

}  // namespace
