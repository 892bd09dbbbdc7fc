// Packs: written atomically beside the checkpoint, bound to it, verified; the
// engine reading a lossless pack gives the same logits bits as the bf16
// shards in every mode (resident, streamed, partly resident, any threads);
// corrupt, truncated and foreign packs fail with errors naming the pack.
#include "pack/pack.h"

#include "arch/open.h"
#include "k3/k3_model.h"
#include "support/pack_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/disk_full_test_util.h"
#include "checkpoint/synthetic_model.h"
#include "base/error.h"
#include "engine/session_test_util.h"
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
  EXPECT_EQ(k3_parts(*base).spine->pack(), nullptr);
  const std::vector<float> want_prefill = run_all(*base, toks, false), want_steps = run_all(*base, toks, true);
  // No pack yet: the default is bf16, asking for lossless is an error.
  EXPECT_EQ(k3_parts(*open_model(t.dir.string())).spine->pack(), nullptr);
  ModelOptions ll;
  ll.spine = "lossless";
  const std::string msg = error_of([&] { open_model(t.dir.string(), ll); });
  EXPECT_NE(msg.find("spine.lossless.pack: no lossless pack here"), std::string::npos) << msg;

  write_pack(open_checkpoint(t.dir.string()), {});
  uint64_t bf16_streamed = 0, packed_streamed = 0;
  for (const pack_test::SpineMode& mode : pack_test::kSpineModes) {
    SCOPED_TRACE(pack_test::mode_name(mode));
    auto m = open_model(t.dir.string(), pack_test::in_mode({}, mode));  // the default: the pack, since it is there
    ASSERT_NE(k3_parts(*m).spine->pack(), nullptr);
    EXPECT_EQ(k3_parts(*m).plan.spine_resident, mode.budget == 0);
    EXPECT_EQ(run_all(*m, toks, false), want_prefill);
    EXPECT_EQ(run_all(*m, toks, true), want_steps);
    if (mode.budget == (2 << 20) && mode.chunk == (64 << 20)) {
      packed_streamed = k3_parts(*m).spine->streamed_bytes_per_pass(true);
      bf.ram_budget = mode.budget;
      bf.max_context = 256;
      bf16_streamed = k3_parts(*open_model(t.dir.string(), bf)).spine->streamed_bytes_per_pass(true);
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
    ASSERT_NE(k3_parts(*m).spine->pack(), nullptr);
    EXPECT_EQ(k3_parts(*m).spine->pack()->path, away.string());
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

// Sets every shard of `dir` an hour back: shards are older than their packs
// (downloaded, then packed), and the edits below then surely move the time.
void backdate_shards(const Checkpoint& ck) {
  for (const std::string& p : ck.shard_paths) fs::last_write_time(p, fs::last_write_time(p) - std::chrono::hours(1));
}

// Rewrites the JSON header of the pack at `path` through `edit` (new trailer, same blocks).
void edit_pack_header(const std::string& path, const std::function<void(nlohmann::json&)>& edit) {
  std::ifstream in(path, std::ios::binary);
  std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t at = 0, bytes = 0;
  std::memcpy(&at, file.data() + file.size() - 24, 8);
  std::memcpy(&bytes, file.data() + file.size() - 16, 8);
  nlohmann::json h = nlohmann::json::parse(file.substr(at, bytes));
  edit(h);
  const std::string text = h.dump();
  const uint64_t n = text.size();
  const uint32_t crc = uint32_t(crc32(0, reinterpret_cast<const Bytef*>(text.data()), uInt(n)));
  file.resize(at);
  file += text;
  file.append(reinterpret_cast<const char*>(&at), 8).append(reinterpret_cast<const char*>(&n), 8);
  file.append(reinterpret_cast<const char*>(&crc), 4).append("SLPK", 4);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << file;
}

// Issue 38: a pack is bound to the shards' content, not only their layout. A
// lossless pack copied from checkpoint A (seed 1) to B (seed 2, same layout)
// is refused naming the pack, and `pack` rebuilds it; B then reads its own
// weights. An edited shard makes its pack stale the same way. A version 1
// pack (no binding) is refused with a rebuild hint.
TEST(Pack, AForeignOrStalePackIsRefusedAndRebuilt) {
  const fs::path root = fs::path(SLUICE_BINARY).parent_path();
  const std::string a = (root / "pack-test-foreign-a").string(), b = (root / "pack-test-foreign-b").string();
  for (const auto& [dir, seed] : {std::pair{a, 1}, std::pair{b, 2}}) {
    fs::remove_all(dir);
    write_synthetic_model(plan_synthetic_model(tiny_preset(), uint64_t(seed)), dir);
  }
  const Checkpoint cka = open_checkpoint(a), ckb = open_checkpoint(b);
  backdate_shards(cka);
  const std::string pa = write_pack(cka, {}).path, pb = pack_path(b, SpineFormat::lossless);
  fs::copy_file(pa, pb);
  EXPECT_NE(error_of([&] { open_pack(pb, ckb); }).find(pb + ": pack is stale: "), std::string::npos);
  const std::string msg = error_of([&] { open_model(b); });  // the default takes the pack: refused
  EXPECT_NE(msg.find(pb + ": pack is stale: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("run `sluice pack --model " + b + " --spine lossless`"), std::string::npos) << msg;
  const PackResult rebuilt = write_pack(ckb, {});
  EXPECT_FALSE(rebuilt.up_to_date);
  EXPECT_NE(rebuilt.replaced.find("pack is stale"), std::string::npos) << rebuilt.replaced;
  EXPECT_TRUE(verify_pack(pb, ckb).empty());
  const std::vector<int> toks = {448, 259, 309, 412};
  ModelOptions bf;
  bf.spine = "bf16";
  EXPECT_EQ(run_all(*open_model(b), toks, true), run_all(*open_model(b, bf), toks, true));

  // A's shard edited after packing (one spine byte: same size, same layout).
  const TensorInfo& lm = cka.tensor("lm_head.weight");
  pack_test::flip_bit(cka.shard_paths[size_t(lm.shard)], lm.offset + 10);
  ModelOptions ll;
  ll.spine = "lossless";
  EXPECT_NE(error_of([&] { open_model(a, ll); }).find(pa + ": pack is stale: "), std::string::npos);
  EXPECT_FALSE(write_pack(cka, {}).up_to_date);
  EXPECT_TRUE(verify_pack(pa, cka).empty());
  EXPECT_EQ(run_all(*open_model(a, ll), toks, true), run_all(*open_model(a, bf), toks, true));

  // A pack of format 1 (shards bound by name and size only).
  edit_pack_header(pa, [](nlohmann::json& h) {
    h["version"] = 1;
    for (auto& sh : h["shards"]) sh.erase("mtime_ns");
  });
  EXPECT_NE(error_of([&] { open_pack(pa, cka); }).find(pa + ": pack format 1 is not bound"), std::string::npos);
  EXPECT_FALSE(write_pack(cka, {}).up_to_date);
  EXPECT_TRUE(write_pack(cka, {}).up_to_date);
  fs::remove_all(a);
  fs::remove_all(b);
}

// The names in t's folder that are pack temps ("<pack>.tmp.<pid>").
std::vector<std::string> pack_temps(const TempModel& t) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(t.dir))
    if (e.path().filename().string().find(".pack.tmp.") != std::string::npos) out.push_back(e.path().string());
  return out;
}

// Runs `child` in a forked process (the kernel pool at one thread, so the
// child needs no worker the fork did not copy) with stderr into `err_path`;
// returns its wait status.
int run_forked(const std::string& err_path, const std::function<int()>& child) {
  kernels::set_num_threads(1);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    ::_exit(child());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  kernels::set_num_threads(0);
  return status;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Issue 38: an interrupted pack left "<pack>.tmp.<pid>" forever (100+ GB at
// K3 scale). The next pack removes temps whose writer is gone, not those of
// one still running; SIGTERM removes the temp at once and says so; past the
// file size limit (SIGXFSZ) the pack fails with a message, not a silent kill.
TEST(Pack, TempsOfInterruptedPacksAreRemoved) {
  TempModel t("pack-test-temps");
  const Checkpoint ck = open_checkpoint(t.dir.string());
  const std::string path = pack_path(t.dir.string(), SpineFormat::lossless);
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  const std::string dead = path + ".tmp." + std::to_string(gone), live = path + ".tmp." + std::to_string(::getppid());
  std::ofstream(dead) << "half a pack";
  std::ofstream(live) << "a pack being written";
  write_pack(ck, {});
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  fs::remove(live);
  fs::remove(path);

  const std::string err = (t.dir / "stderr.txt").string();
  int status = run_forked(err, [&] {
    remove_temps_on_signal("pack");
    PackOptions o;
    o.progress = [](uint64_t, uint64_t) { ::raise(SIGTERM); };  // mid-pack: the temp exists
    write_pack(ck, o);
    return 0;
  });
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  EXPECT_NE(read_text(err).find("sluice: pack: stopped by SIGTERM; unfinished temporary files removed"),
            std::string::npos)
      << read_text(err);
  EXPECT_TRUE(pack_temps(t).empty());
  EXPECT_FALSE(fs::exists(path));

  status = run_forked(err, [&] {
    remove_temps_on_signal("pack");
    const rlimit small{64 << 10, 64 << 10};
    ::setrlimit(RLIMIT_FSIZE, &small);
    const std::string msg = error_of([&] { write_pack(ck, {}); });
    std::fprintf(stderr, "%s\n", msg.c_str());
    return msg.find("File too large") != std::string::npos ? 3 : 4;
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3) << status << ": " << read_text(err);
  EXPECT_NE(read_text(err).find(".pack.tmp."), std::string::npos) << read_text(err);  // names the file
  EXPECT_TRUE(pack_temps(t).empty());
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace sluice
