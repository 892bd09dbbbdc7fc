#include "base/read_fault.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "base/error.h"

namespace sluice {

namespace detail {
std::atomic<bool> read_faults_armed{false};
}  // namespace detail

namespace {

struct FaultTable {
  std::mutex mu;
  std::vector<ReadFault> faults;
  uint64_t fired = 0;
};

FaultTable& table() {
  static auto* t = new FaultTable();  // never destroyed: reads may run during exit
  return *t;
}

struct HealthRecord {
  std::mutex mu;
  std::atomic<bool> failing{false};
  uint64_t failures = 0;
  std::string last_error;
};

HealthRecord& health() {
  static auto* h = new HealthRecord();
  return *h;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

uint64_t parse_number(const std::string& text, const std::string& spec) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 19)
    fail("SLUICE_FAULT_READ", "'" + spec + "': '" + text + "' is not a byte count");
  return std::stoull(text);
}

// kind:path:begin+length[:times]
ReadFault parse_fault(const std::string& spec) {
  std::vector<std::string> f;
  size_t at = 0;
  for (size_t c; (c = spec.find(':', at)) != std::string::npos; at = c + 1) f.push_back(spec.substr(at, c - at));
  f.push_back(spec.substr(at));
  if (f.size() != 3 && f.size() != 4)
    fail("SLUICE_FAULT_READ", "'" + spec + "': expected kind:path:first+count[:times]");
  ReadFault r;
  if (f[0] == "eio") r.kind = FaultKind::eio;
  else if (f[0] == "short") r.kind = FaultKind::short_read;
  else fail("SLUICE_FAULT_READ", "'" + spec + "': the kind is eio or short, not '" + f[0] + "'");
  if (f[1].empty()) fail("SLUICE_FAULT_READ", "'" + spec + "': no file named");
  r.path = f[1];
  const size_t plus = f[2].find('+');
  if (plus == std::string::npos) fail("SLUICE_FAULT_READ", "'" + spec + "': the range is first+count");
  r.begin = parse_number(f[2].substr(0, plus), spec);
  r.length = parse_number(f[2].substr(plus + 1), spec);
  if (f.size() == 4) r.times = int(std::min<uint64_t>(parse_number(f[3], spec), 1u << 30));
  return r;
}

}  // namespace

void add_read_fault(const ReadFault& f) {
  FaultTable& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  t.faults.push_back(f);
  detail::read_faults_armed.store(true);
}

void clear_read_faults() {
  FaultTable& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  t.faults.clear();
  t.fired = 0;
  detail::read_faults_armed.store(false);
}

void arm_read_faults_from_env() {
  const char* env = std::getenv("SLUICE_FAULT_READ");
  if (!env || !*env) return;
  const std::string all = env;
  std::vector<ReadFault> parsed;
  size_t at = 0;
  for (size_t c; at <= all.size(); at = c + 1) {
    c = all.find(';', at);
    if (c == std::string::npos) c = all.size();
    if (c > at) parsed.push_back(parse_fault(all.substr(at, c - at)));
  }
  for (const ReadFault& f : parsed) add_read_fault(f);
}

uint64_t read_faults_fired() {
  FaultTable& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  return t.fired;
}

int64_t detail::apply_read_fault(const std::string& path, uint64_t offset, uint64_t length, int64_t res) {
  if (res < 0 || length == 0) return res;  // failed anyway
  FaultTable& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  for (ReadFault& f : t.faults) {
    if (f.times == 0 || !ends_with(path, f.path)) continue;
    if (offset >= f.begin + f.length || offset + length <= f.begin) continue;  // no overlap
    int64_t out = -EIO;
    if (f.kind == FaultKind::short_read) {
      out = offset < f.begin ? int64_t(std::min<uint64_t>(uint64_t(res), f.begin - offset)) : 0;
      if (out == res) continue;  // the read ended before the fault anyway
    }
    if (f.times > 0) f.times--;
    t.fired++;
    return out;
  }
  return res;
}

void note_read_failure(const std::string& what) {
  HealthRecord& h = health();
  std::lock_guard<std::mutex> lk(h.mu);
  h.failures++;
  h.last_error = what;
  h.failing.store(true);
}

void note_reads_ok() {
  HealthRecord& h = health();
  if (h.failing.load(std::memory_order_relaxed)) h.failing.store(false);
}

ReadHealth read_health() {
  HealthRecord& h = health();
  std::lock_guard<std::mutex> lk(h.mu);
  return {h.failing.load(), h.failures, h.last_error};
}

}  // namespace sluice
