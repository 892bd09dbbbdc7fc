// tests/support/pack_test_util.h — what the pack tests share: a scratch copy of the
// k3-tiny fixture model (a pack goes beside its shards), an error catcher, and
// the damaged-pack check every spine format runs.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "arch/open.h"
#include "base/error.h"
#include "checkpoint/checkpoint.h"
#include "engine/session_test_util.h"
#include "kernels/threads.h"
#include "pack/pack.h"

namespace sluice::pack_test {

namespace fs = std::filesystem;
inline const std::string kFixture = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model";

// A copy of the fixture's model in the build tree, removed when done.
struct TempModel {
  fs::path dir;
  explicit TempModel(const std::string& name) : dir(fs::path(SLUICE_BINARY).parent_path() / name) {
    fs::remove_all(dir);
    fs::copy(kFixture, dir);
  }
  ~TempModel() { fs::remove_all(dir); }
};

// The message of the sluice::Error f throws ("" if none).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The spine settings every pack format runs in: resident; streamed with whole
// matrices and with 16 KiB pieces; partly resident at two budgets.
struct SpineMode {
  uint64_t budget, chunk;
  int threads;
};
inline constexpr SpineMode kSpineModes[] = {
    {0, 64 << 20, 1}, {2 << 20, 64 << 20, 3}, {2 << 20, 16 << 10, 2}, {5 << 19, 16 << 10, 1}, {3 << 20, 16 << 10, 3}};

// `o` in mode m, for a 256-token context; sets the kernel thread count too.
inline ModelOptions in_mode(ModelOptions o, const SpineMode& m) {
  kernels::set_num_threads(m.threads);
  o.ram_budget = m.budget;
  o.spine_chunk_bytes = m.chunk;
  o.max_context = 256;
  return o;
}

inline std::string mode_name(const SpineMode& m) {
  return "budget " + std::to_string(m.budget) + " chunk " + std::to_string(m.chunk) + " threads " +
         std::to_string(m.threads);
}

// Flips one bit of the byte at `offset` of `path`.
inline void flip_bit(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  char c = 0;
  f.seekg(std::streamoff(offset));
  f.read(&c, 1);
  c = char(c ^ 0x10);
  f.seekp(std::streamoff(offset));
  f.write(&c, 1);
}

// Writes the pack `opt` asks for beside t's model, damages it, and checks that
// every reader names the file: a flipped bit in the head's first block
// (verify_pack; a model holding the spine resident, and one streaming it),
// then a cut-off end (refused at open). Packing again replaces it.
// `spine`: the model's --spine ("" the default, which takes the pack).
inline void check_damage_is_caught(const TempModel& t, const PackOptions& opt, const std::string& spine) {
  const Checkpoint ck = open_checkpoint(t.dir.string());
  const std::string path = write_pack(ck, opt).path;
  const TensorInfo& lm = ck.tensor("lm_head.weight");
  {
    const Pack p = open_pack(path, ck);
    const PackedTensor* head = p.find(lm.shard, lm.offset);
    ASSERT_NE(head, nullptr);
    flip_bit(path, head->data_at + head->index[1] / 2);
  }
  const std::string damaged = path + ": block 0 of tensor 'lm_head.weight' fails its checksum";
  const auto problems = verify_pack(path, ck);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find(damaged), std::string::npos) << problems[0];
  for (uint64_t budget : {uint64_t(0), uint64_t(2) << 20}) {  // resident: at open; streamed: at the first pass
    ModelOptions o;
    o.ram_budget = budget;
    o.spine = spine;
    const std::string msg = error_of([&] {
      auto m = open_model(t.dir.string(), o);
      run_all(*m, {448, 259}, false);
    });
    EXPECT_NE(msg.find(damaged), std::string::npos) << msg;
  }
  fs::resize_file(path, fs::file_size(path) - 100);
  ModelOptions o;
  o.spine = spine;
  const std::string msg = error_of([&] { open_model(t.dir.string(), o); });
  EXPECT_NE(msg.find(path + ": pack is truncated"), std::string::npos) << msg;
  EXPECT_FALSE(write_pack(ck, opt).up_to_date);
  EXPECT_TRUE(verify_pack(path, ck).empty());
}

}  // namespace sluice::pack_test
