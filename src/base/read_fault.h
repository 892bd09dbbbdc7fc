// base/read_fault.h — read faults: a seam that injects them (for tests), and
// the process-wide record of the ones that happened (what /health reports).
//
// Injection: a fault makes reads of one file that overlap a byte range fail
// with EIO, or come back short as if the file ended where the range begins,
// for its first `times` reads (or until cleared). Every read of weight bytes
// passes through it: SpanReader's completions (both engines, io_uring and
// pread) and read_exact (embedding rows, the pread expert source). Tests add
// faults with add_read_fault(); a process is armed from the environment by
// arm_read_faults_from_env() (the CLI calls it):
//   SLUICE_FAULT_READ="eio:model-00001-of-00003.safetensors:4096+100:1;short:..."
//   kind:path suffix:first byte+byte count[:times]   (times omitted: until cleared)
// Off (no fault ever added) a read pays one relaxed atomic load.
//
// Record: every read that failed for real or by injection is noted; reads
// are "failing" from a failure until a forward pass completes (note_reads_ok).
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

namespace sluice {

enum class FaultKind { eio, short_read };

struct ReadFault {
  FaultKind kind = FaultKind::eio;
  std::string path;    // reads of files whose path ends with this
  uint64_t begin = 0;  // the bytes [begin, begin + length) of that file
  uint64_t length = 0;
  int times = -1;      // reads it fails; -1: until cleared
};

void add_read_fault(const ReadFault& f);
void clear_read_faults();
// Parses SLUICE_FAULT_READ (see above) and adds its faults; throws Error on a bad spec.
void arm_read_faults_from_env();
// Reads the armed faults have failed so far (since the last clear).
uint64_t read_faults_fired();

namespace detail {
extern std::atomic<bool> read_faults_armed;
int64_t apply_read_fault(const std::string& path, uint64_t offset, uint64_t length, int64_t res);
}  // namespace detail

// What a read of `length` bytes at `offset` of `path` that returned `res`
// (bytes, or -errno) returns under the armed faults: -EIO, fewer bytes, or res.
inline int64_t read_fault(const std::string& path, uint64_t offset, uint64_t length, int64_t res) {
  if (!detail::read_faults_armed.load(std::memory_order_relaxed)) return res;
  return detail::apply_read_fault(path, offset, length, res);
}

struct ReadHealth {
  bool failing = false;    // a read failed and no forward pass has completed since
  uint64_t failures = 0;   // reads that failed since the process started
  std::string last_error;  // the latest failure's message
};

void note_read_failure(const std::string& what);
// A forward pass read everything it needed: reads are not failing (any more).
void note_reads_ok();
ReadHealth read_health();

}  // namespace sluice
