// Packs: written atomically beside the checkpoint, bound to it, verified; the
// engine reading a lossless pack gives the same logits bits as the bf16
// shards in every mode (resident, streamed, partly resident, any threads);
// corrupt, truncated and foreign packs fail with errors naming the pack.
#include "pack/pack.h"
#include "pack/pack_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "base/disk_full_test_util.h"
#include "base/error.h"
#include "engine/session_test_util.h"
#include "k3/model.h"
#include "kernels/threads.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using pack_test::TempModel;
using pack_test::error_of;

TEST(Pack, WritesOnceVerifiesAndRefusesAnotherCheckpoint) {
  TempModel t("pack-test-write");
  const Checkpoint ck = open_checkpoint(t.dir.string());
  const PackResult r = write_pack(ck, {});
  EXPECT_FALSE(r.up_to_date);
  EXPECT_EQ(r.path, pack_path(t.dir.string(), SpineFormat::lossless));
  EXPECT_TRUE(fs::exists(r.path));
  EXPECT_GT(r.source_bytes, 0u);
  EXPECT_LT(r.packed_bytes, r.source_bytes);
  for (const auto& e : fs::directory_iterator(t.dir)) EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos);
  const auto mtime = fs::last_write_time(r.path);
  const PackResult again = write_pack(ck, {});
  EXPECT_TRUE(again.up_to_date);
  EXPECT_EQ(fs::last_write_time(r.path), mtime);
  EXPECT_TRUE(verify_pack(r.path, ck).empty());
  const Pack p = open_pack(r.path, ck);
  EXPECT_EQ(p.packed_bytes, r.packed_bytes);
  EXPECT_TRUE(p.find(ck.tensor("lm_head.weight").shard, ck.tensor("lm_head.weight").offset));

  // Another checkpoint (nanoK3) refuses it.
  const Checkpoint nano = open_checkpoint(std::string(SLUICE_SOURCE_DIR) + "/models/nanok3");
  const std::string msg = error_of([&] { open_pack(r.path, nano); });
  EXPECT_NE(msg.find(r.path + ": pack was made from another checkpoint"), std::string::npos) << msg;
  EXPECT_FALSE(verify_pack(r.path, nano).empty());
}

TEST(Pack, LosslessLogitsAreBitIdenticalInEveryMode) {
  TempModel t("pack-test-logits");
  const std::vector<int> toks = {448, 259, 309, 412, 370, 399, 335, 283, 72, 307};
  ModelOptions bf;
  bf.spine = "bf16";
  auto base = open_model(t.dir.string(), bf);
  EXPECT_EQ(base->spine->pack(), nullptr);
  const std::vector<float> want_prefill = run_all(*base, toks, false), want_steps = run_all(*base, toks, true);
  // No pack yet: the default is bf16, asking for lossless is an error.
  EXPECT_EQ(open_model(t.dir.string())->spine->pack(), nullptr);
  ModelOptions ll;
  ll.spine = "lossless";
  const std::string msg = error_of([&] { open_model(t.dir.string(), ll); });
  EXPECT_NE(msg.find("spine.lossless.pack: no lossless pack here"), std::string::npos) << msg;

  write_pack(open_checkpoint(t.dir.string()), {});
  uint64_t bf16_streamed = 0, packed_streamed = 0;
  for (const pack_test::SpineMode& mode : pack_test::kSpineModes) {
    SCOPED_TRACE(pack_test::mode_name(mode));
    auto m = open_model(t.dir.string(), pack_test::in_mode({}, mode));  // the default: the pack, since it is there
    ASSERT_NE(m->spine->pack(), nullptr);
    EXPECT_EQ(m->plan.spine_resident, mode.budget == 0);
    EXPECT_EQ(run_all(*m, toks, false), want_prefill);
    EXPECT_EQ(run_all(*m, toks, true), want_steps);
    if (mode.budget == (2 << 20) && mode.chunk == (64 << 20)) {
      packed_streamed = m->spine->streamed_bytes_per_pass(true);
      bf.ram_budget = mode.budget;
      bf.max_context = 256;
      bf16_streamed = open_model(t.dir.string(), bf)->spine->streamed_bytes_per_pass(true);
    }
  }
  kernels::set_num_threads(0);
  EXPECT_GT(packed_streamed, 0u);
  EXPECT_LT(packed_streamed, bf16_streamed);
}

// Packing over an existing pack (here another format to the same --out) onto a
// disk that fills midway: the old pack stays whole and no temp is left.
TEST(Pack, AFullDiskMidwayLeavesTheOldPack) {
  TempModel t("pack-test-full");
  const Checkpoint ck = open_checkpoint(t.dir.string());
  const std::string path = write_pack(ck, {}).path;
  std::ifstream in(path, std::ios::binary);
  const std::string before((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto entries = [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(t.dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> was = entries();
  PackOptions q8;
  q8.format = SpineFormat::int8;
  q8.out = path;
  {
    testing::DiskFullAfter full(64 << 10);
    const std::string msg = error_of([&] { write_pack(ck, q8); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
  }
  std::ifstream again(path, std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>()), before);
  EXPECT_EQ(entries(), was);
  EXPECT_TRUE(verify_pack(path, ck).empty());
}

TEST(Pack, CorruptAndTruncatedPacksFailNamingTheFile) {
  pack_test::check_damage_is_caught(pack_test::TempModel("pack-test-corrupt"), {}, "");
}

// A checkpoint folder that cannot hold its pack (read-only, shared): the pack
// lives elsewhere (pack --out) and ModelOptions::spine_pack points at it, with
// the same binding checks and the same logits bits.
TEST(Pack, PackKeptElsewhereIsFoundByPathAndStillBound) {
  TempModel t("pack-test-elsewhere");
  const fs::path away = t.dir.parent_path() / "pack-test-elsewhere.lossless.pack";
  fs::remove(away);
  const Checkpoint ck = open_checkpoint(t.dir.string());
  PackOptions po;
  po.out = away.string();
  EXPECT_EQ(write_pack(ck, po).path, away.string());
  EXPECT_FALSE(fs::exists(pack_path(t.dir.string(), SpineFormat::lossless)));
  const std::vector<int> toks = {448, 259, 309, 412};
  ModelOptions bf;
  bf.spine = "bf16";
  const std::vector<float> want = run_all(*open_model(t.dir.string(), bf), toks, true);
  for (const std::string& spine : {std::string(), std::string("lossless")}) {
    ModelOptions o;
    o.spine = spine;
    o.spine_pack = away.string();
    o.ram_budget = 2 << 20;  // streamed
    o.max_context = 256;
    auto m = open_model(t.dir.string(), o);
    ASSERT_NE(m->spine->pack(), nullptr);
    EXPECT_EQ(m->spine->pack()->path, away.string());
    EXPECT_EQ(run_all(*m, toks, true), want);
  }
  // The wrong format, bf16 with a pack, a missing file, another checkpoint: errors naming the file.
  ModelOptions o;
  o.spine_pack = away.string();
  o.spine = "int8";
  EXPECT_NE(error_of([&] { open_model(t.dir.string(), o); }).find(away.string() + ": holds a lossless spine, not int8"),
            std::string::npos);
  o.spine = "bf16";
  EXPECT_NE(error_of([&] { open_model(t.dir.string(), o); }).find(away.string() + ": --spine bf16 reads the shards"),
            std::string::npos);
  o.spine = "";
  o.spine_pack = away.string() + ".missing";
  EXPECT_NE(error_of([&] { open_model(t.dir.string(), o); }).find(".missing: no such pack; run `sluice pack"),
            std::string::npos);
  o.spine_pack = away.string();
  const std::string nano = std::string(SLUICE_SOURCE_DIR) + "/models/nanok3";
  EXPECT_NE(error_of([&] { open_model(nano, o); }).find(away.string() + ": pack was made from another checkpoint"),
            std::string::npos);
  fs::remove(away);
}

}  // namespace
}  // namespace sluice
