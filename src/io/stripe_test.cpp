// Stripes (io/stripe.h): placement by weight, logits bit-identical striped and
// unstriped (resident and streamed spine), a missing drive falls back to the
// shards naming the drive, damage is found by verify, and a full disk or a
// killed run leaves the model usable and the next run resumes.
#include "io/stripe.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "arch/open.h"
#include "base/atomic_file.h"
#include "base/disk_full_test_util.h"
#include "base/file_io.h"
#include "base/read_file.h"
#include "checkpoint/shard_stamp.h"
#include "hub/setup_manifest.h"
#include "hub/sha256.h"
#include "hub/verify_install.h"
#include "engine/session_test_util.h"
#include "support/pack_test_util.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using pack_test::TempModel;

struct Drives {
  fs::path root;
  explicit Drives(const std::string& name) : root(fs::path(SLUICE_BINARY).parent_path() / name) {
    fs::remove_all(root);
    fs::create_directories(root);
  }
  ~Drives() { fs::remove_all(root); }
  std::vector<StripeDrive> two(double a, double b) const { return {{(root / "a").string(), a}, {(root / "b").string(), b}}; }
};

std::vector<float> logits(const std::string& dir, uint64_t budget, bool no_stripe) {
  ModelOptions o;
  o.ram_budget = budget;
  o.max_context = 256;
  o.no_stripe = no_stripe;
  auto m = open_model(dir, o);
  return run_all(*m, {448, 259, 309, 17}, true);
}

TEST(Stripe, ExpertsSplitByWeightAndLogitsAreBitIdentical) {
  TempModel t("stripe-test-logits");
  Drives d("stripe-test-logits-drives");
  const Checkpoint ck = open_checkpoint(t.dir.string());
  const StripeResult r = write_stripe(ck, d.two(2, 1));
  EXPECT_FALSE(r.up_to_date);
  ASSERT_EQ(r.drive_bytes.size(), 2u);
  const double share = double(r.drive_bytes[0]) / double(r.drive_bytes[0] + r.drive_bytes[1]);
  EXPECT_NEAR(share, 2.0 / 3, 0.05);
  EXPECT_TRUE(write_stripe(ck, d.two(2, 1)).up_to_date);
  EXPECT_TRUE(verify_stripe(ck).empty());

  Checkpoint striped = ck;
  const StripeUse u = apply_stripe(striped);
  EXPECT_TRUE(u.present);
  EXPECT_GT(u.files_used, 0);
  EXPECT_TRUE(u.warnings.empty());
  for (size_t l = 0; l < striped.experts.size(); l++)
    for (const FileSpan& s : striped.experts[l]) EXPECT_GE(s.file, int(ck.shard_paths.size()));
  for (uint64_t budget : {uint64_t(0), uint64_t(2) << 20})  // resident spine; streamed
    EXPECT_EQ(logits(t.dir.string(), budget, false), logits(t.dir.string(), budget, true)) << budget;
}

TEST(Stripe, MissingDriveFallsBackNamingItAndDamageIsFound) {
  TempModel t("stripe-test-missing");
  Drives d("stripe-test-missing-drives");
  const Checkpoint ck = open_checkpoint(t.dir.string());
  write_stripe(ck, d.two(1, 1));
  const std::vector<float> want = logits(t.dir.string(), 0, true);
  // Damage every file of drive b: verify names it, and reads through the stripe differ.
  const Stripe s = read_stripe(t.dir.string());
  for (const StripeFile& f : s.files)
    if (f.drive == 1)
      for (size_t i = 0; i < f.experts.size(); i++) pack_test::flip_bit(f.path, s.stride * i + 100);
  const auto problems = verify_stripe(ck);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find((d.root / "b").string()), std::string::npos) << problems[0];
  EXPECT_NE(logits(t.dir.string(), 0, false), want);
  fs::remove_all(d.root / "b");
  Checkpoint striped = ck;
  const StripeUse u = apply_stripe(striped);
  ASSERT_EQ(u.warnings.size(), 1u);
  EXPECT_NE(u.warnings[0].find("drive " + (d.root / "b").string()), std::string::npos) << u.warnings[0];
  EXPECT_EQ(logits(t.dir.string(), 0, false), want);
  // The next run writes the drive again.
  const StripeResult again = write_stripe(ck, d.two(1, 1));
  EXPECT_FALSE(again.up_to_date);
  EXPECT_GT(again.written, 0);
  EXPECT_GT(again.kept, 0);
  EXPECT_TRUE(verify_stripe(ck).empty());
}

// --copies 2 over three drives: every expert on two of them (twice the
// bytes), each copy's span the shards' bits; logits identical whichever copy a
// read takes; one drive gone: its experts come from their other copy, with a
// warning saying so and no read from the shards; more copies than drives refused.
TEST(Stripe, CopiesPutEachExpertOnTwoDrivesAndAnyCopyServes) {
  TempModel t("stripe-test-copies");
  Drives d("stripe-test-copies-drives");
  const Checkpoint ck = open_checkpoint(t.dir.string());
  std::vector<StripeDrive> three = d.two(1, 1);
  three.push_back({(d.root / "c").string(), 1});
  EXPECT_THROW(write_stripe(ck, d.two(1, 1), 3), Error);
  const StripeResult one = write_stripe(ck, three, 1);
  const StripeResult r = write_stripe(ck, three, 2);
  EXPECT_FALSE(r.up_to_date);  // copies changed: written again
  uint64_t once = 0, twice = 0;
  for (uint64_t b : one.drive_bytes) once += b;
  for (uint64_t b : r.drive_bytes) twice += b;
  EXPECT_EQ(twice, 2 * once);
  EXPECT_TRUE(write_stripe(ck, three, 2).up_to_date);
  EXPECT_FALSE(write_stripe(ck, three, 1).up_to_date);
  write_stripe(ck, three, 2);
  EXPECT_TRUE(verify_stripe(ck).empty());
  EXPECT_EQ(read_stripe(t.dir.string()).copies, 2);

  Checkpoint striped = ck;
  const StripeUse u = apply_stripe(striped);
  ASSERT_EQ(u.copy_spans.size(), striped.experts.size());
  for (size_t l = 0; l < striped.experts.size(); l++)
    for (size_t e = 0; e < striped.experts[l].size(); e++) {
      ASSERT_EQ(u.copy_spans[l][e].size(), 1u) << l << "/" << e;
      EXPECT_NE(u.file_devices[size_t(u.copy_spans[l][e][0].file)],
                u.file_devices[size_t(striped.experts[l][e].file)]);  // another drive
    }
  const std::vector<float> want = logits(t.dir.string(), 0, true);
  for (uint64_t budget : {uint64_t(0), uint64_t(2) << 20})
    EXPECT_EQ(logits(t.dir.string(), budget, false), logits(t.dir.string(), budget, true)) << budget;
  // Drive a gone: every expert still has a drive copy (on b or c).
  fs::remove_all(d.root / "a");
  Checkpoint left = ck;
  const StripeUse v = apply_stripe(left);
  ASSERT_EQ(v.warnings.size(), 1u);
  EXPECT_NE(v.warnings[0].find("their other copies"), std::string::npos) << v.warnings[0];
  for (size_t l = 0; l < left.experts.size(); l++)
    for (const FileSpan& s : left.experts[l]) EXPECT_GE(s.file, int(ck.shard_paths.size()));
  EXPECT_EQ(logits(t.dir.string(), 0, false), want);
}

// --spine: every tensor outside the experts' spans goes to a drive too (split
// by weight), read from there by the resident load and the stream alike: the
// logits are the unstriped ones, a damaged spine file changes them (so they are
// read from it) and verify names the tensor; a spine file gone leaves its
// tensors on the shards with a warning naming the drive; without --spine the
// stripe is written again without spine files.
TEST(Stripe, SpineOverTheDrivesGivesTheSameBits) {
  TempModel t("stripe-test-spine");
  Drives d("stripe-test-spine-drives");
  const Checkpoint ck = open_checkpoint(t.dir.string());
  const StripeResult r = write_stripe(ck, d.two(1, 1), 1, {}, /*spine=*/true);
  EXPECT_FALSE(r.up_to_date);
  EXPECT_TRUE(write_stripe(ck, d.two(1, 1), 1, {}, true).up_to_date);
  EXPECT_TRUE(verify_stripe(ck).empty());
  const Stripe s = read_stripe(t.dir.string());
  ASSERT_FALSE(s.spine_files.empty());
  uint64_t spine_bytes[2] = {0, 0}, in_experts = 0, all = 0;
  for (const StripeFile& f : s.spine_files)
    for (const std::string& n : f.tensors) spine_bytes[f.drive] += ck.tensor(n).nbytes;
  for (const auto& [name, info] : ck.tensors) all += info.nbytes;
  for (const auto& layer : ck.experts)
    for (const FileSpan& e : layer) in_experts += e.length;
  EXPECT_GT(spine_bytes[0], 0u);
  EXPECT_GT(spine_bytes[1], 0u);
  EXPECT_EQ(spine_bytes[0] + spine_bytes[1] + in_experts, all) << "every tensor once, in an expert span or a spine file";

  Checkpoint striped = ck;
  const StripeUse u = apply_stripe(striped);
  EXPECT_GT(u.spine_tensors, 0);
  EXPECT_TRUE(u.warnings.empty());
  for (const StripeFile& f : s.spine_files)
    for (size_t i = 0; i < f.tensors.size(); i++) {
      EXPECT_GE(striped.tensor(f.tensors[i]).shard, int(ck.shard_paths.size()));
      EXPECT_EQ(striped.tensor(f.tensors[i]).offset, f.offsets[i]);
    }
  const std::vector<float> want0 = logits(t.dir.string(), 0, true), want2 = logits(t.dir.string(), 2 << 20, true);
  EXPECT_EQ(logits(t.dir.string(), 0, false), want0);
  EXPECT_EQ(logits(t.dir.string(), 2 << 20, false), want2);

  // The largest layer tensor's file, damaged: read from there, found by verify.
  const StripeFile* big = nullptr;
  size_t at = 0;
  for (const StripeFile& f : s.spine_files)
    for (size_t i = 0; i < f.tensors.size(); i++)
      if (f.tensors[i].find("layers.") != std::string::npos &&
          (!big || ck.tensor(f.tensors[i]).nbytes > ck.tensor(big->tensors[at]).nbytes))
        big = &f, at = i;
  ASSERT_NE(big, nullptr);
  pack_test::flip_bit(big->path, big->offsets[at] + 6);
  const auto problems = verify_stripe(ck);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("tensor " + big->tensors[at]), std::string::npos) << problems[0];
  EXPECT_NE(logits(t.dir.string(), 2 << 20, false), want2);
  EXPECT_TRUE(verify_stripe(ck, /*repair=*/true).empty());
  EXPECT_EQ(logits(t.dir.string(), 2 << 20, false), want2);

  fs::remove(big->path);
  Checkpoint gone = ck;
  const StripeUse v = apply_stripe(gone);
  ASSERT_EQ(v.warnings.size(), 1u);
  EXPECT_NE(v.warnings[0].find("drive " + s.drives[size_t(big->drive)].path), std::string::npos) << v.warnings[0];
  EXPECT_NE(v.warnings[0].find("spine"), std::string::npos) << v.warnings[0];
  EXPECT_EQ(gone.tensor(big->tensors[at]).shard, ck.tensor(big->tensors[at]).shard);
  EXPECT_EQ(logits(t.dir.string(), 2 << 20, false), want2);

  EXPECT_FALSE(write_stripe(ck, d.two(1, 1)).up_to_date);  // no --spine now: the spine files go
  EXPECT_TRUE(read_stripe(t.dir.string()).spine_files.empty());
  for (const auto& e : fs::recursive_directory_iterator(d.root))
    EXPECT_NE(e.path().filename().string().substr(0, 1), "S") << e.path();
}

TEST(Stripe, FullDiskLeavesTheModelUsableAndTheNextRunResumes) {
  TempModel t("stripe-test-full");
  Drives d("stripe-test-full-drives");
  const Checkpoint ck = open_checkpoint(t.dir.string());
  const std::vector<float> want = logits(t.dir.string(), 0, true);
  const uint64_t span = ck.config.expert_span_bytes();
  {
    testing::DiskFullAfter full(4 * span);  // no file may grow past four spans: a layer's file fails
    EXPECT_THROW(write_stripe(ck, d.two(1, 1)), Error);
  }
  EXPECT_FALSE(fs::exists(stripe_manifest_path(t.dir.string())));
  EXPECT_EQ(logits(t.dir.string(), 0, false), want);
  for (const auto& e : fs::recursive_directory_iterator(d.root))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  const StripeResult r = write_stripe(ck, d.two(1, 1));
  EXPECT_FALSE(r.up_to_date);
  EXPECT_TRUE(verify_stripe(ck).empty());
  EXPECT_EQ(logits(t.dir.string(), 0, false), want);
}

// The bytes of `span` in its file.
std::vector<uint8_t> span_bytes(const Checkpoint& ck, const FileSpan& span) {
  std::vector<uint8_t> b(span.length);
  read_exact(ck.shard_paths[size_t(span.file)], b.data(), b.size(), span.offset);
  return b;
}

// The setup manifest `sluice setup --full` would have written for ck's
// shards (each one's sha256), written to its folder.
SetupManifest record_full_install(const Checkpoint& ck) {
  SetupManifest setup;
  setup.mode = "full";
  for (const std::string& shard : ck.shard_paths) {
    ManifestFile f;
    f.size = fs::file_size(shard);
    f.sha256 = sha256_file(shard);
    f.checked = "lfs-sha256";
    setup.files[base_name(shard)] = f;
    setup.planned[base_name(shard)] = PlannedFile{f.size, f.sha256, "", false};
  }
  write_setup_manifest(ck.dir, setup);
  return setup;
}

// --move: refused while a process has the shards open; then the shards' expert
// bytes are zeros (their header, spine and times unchanged: stamps still
// match), the drives alone give the unstriped logits (resident and
// streamed), verify checks the moved files by checksum; --no-stripe, a lost
// drive with no other copy, a stale manifest over the holes and a move cut
// off while punching are clear errors, never zeros; the next `stripe --move`
// finishes a cut-off one; a restripe (two copies) reads the experts from the
// current stripe and stays moved.
TEST(Stripe, MoveFreesTheShardsAndTheDrivesHoldTheOnlyCopy) {
  TempModel t("stripe-test-move");
  Drives d("stripe-test-move-drives");
  const std::string dir = t.dir.string();
  const Checkpoint ck = open_checkpoint(dir);
  const std::vector<float> want0 = logits(dir, 0, true), want2 = logits(dir, 2 << 20, true);
  const nlohmann::json stamps = shard_stamps_json(ck);
  std::vector<std::vector<uint8_t>> spine_before;
  for (const auto& [name, info] : ck.tensors) spine_before.push_back(span_bytes(ck, info.span()));
  {
    ModelOptions o;
    o.max_context = 16;
    auto open = open_model(dir, o);  // its readers hold the shards
    const std::string e = pack_test::error_of([&] { write_stripe(ck, d.two(1, 1), 1, {}, false, /*move=*/true); });
    EXPECT_NE(e.find("another sluice process"), std::string::npos) << e;
    EXPECT_FALSE(stripe_moved(dir));
  }
  const SetupManifest setup = record_full_install(ck);
  StripeResult r;
  const std::string refused = pack_test::error_of([&] { r = write_stripe(ck, d.two(1, 1), 1, {}, false, true); });
  if (refused.find("cannot free part of a file") != std::string::npos) GTEST_SKIP() << refused;
  ASSERT_EQ(refused, "");
  EXPECT_TRUE(stripe_moved(dir));
  EXPECT_EQ(shard_stamps_differ(stamps, ck), "") << "the shards' times are set back";
  for (const auto& layer : ck.experts)
    for (const FileSpan& e : layer)
      for (uint8_t b : span_bytes(ck, e)) {
        ASSERT_EQ(b, 0) << "an expert byte left in the shards";
      }
  size_t i = 0;
  for (const auto& [name, info] : ck.tensors) {
    bool expert = false;
    for (const auto& layer : ck.experts)
      for (const FileSpan& e : layer) expert = expert || (info.shard == e.file && info.offset >= e.offset && info.offset < e.offset + e.length);
    if (!expert) {
      EXPECT_EQ(span_bytes(ck, info.span()), spine_before[i]) << name;
    }
    i++;
  }
  EXPECT_EQ(logits(dir, 0, false), want0);
  EXPECT_EQ(logits(dir, 2 << 20, false), want2);
  EXPECT_TRUE(verify_stripe(ck).empty());
  EXPECT_NE(sha256_file(ck.shard_paths[0]), setup.files.at(base_name(ck.shard_paths[0])).sha256);
  std::vector<std::string> lines;
  VerifyResult v = verify_model(dir, false, [&](const VerifyLine& l) { lines.push_back(l.text); });
  EXPECT_EQ(v.problems, 0);
  int through = 0;
  for (const std::string& l : lines) through += l.find("moved there") != std::string::npos;
  EXPECT_EQ(through, int(ck.shard_paths.size())) << "each shard's sha256 with its experts read from the drives";
  EXPECT_NE(pack_test::error_of([&] { logits(dir, 0, true); }).find("--no-stripe"), std::string::npos);
  EXPECT_TRUE(write_stripe(ck, d.two(1, 1), 1, {}, false, true).up_to_date);
  EXPECT_TRUE(write_stripe(ck, d.two(1, 1)).up_to_date) << "moved stays moved";

  // A restripe reads the experts from the drives (the shards hold zeros).
  std::vector<StripeDrive> three = d.two(1, 1);
  three.push_back({(d.root / "c").string(), 1});
  EXPECT_FALSE(write_stripe(ck, three, 2).up_to_date);
  EXPECT_TRUE(read_stripe(dir).moved);
  EXPECT_TRUE(verify_stripe(ck).empty());
  EXPECT_EQ(logits(dir, 0, false), want0);
  fs::remove_all(d.root / "c");  // every expert has another copy
  EXPECT_EQ(logits(dir, 2 << 20, false), want2);
  write_stripe(ck, d.two(1, 1));  // one copy again, from what is left
  EXPECT_EQ(logits(dir, 0, false), want0);

  // A damaged moved file: verify finds it and cannot repair it from the shards.
  const Stripe s = read_stripe(dir);
  const StripeFile& f = s.files[0];
  pack_test::flip_bit(f.path, 100);
  const auto problems = verify_stripe(ck, /*repair=*/true);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("only copy"), std::string::npos) << problems[0];
  v = verify_model(dir, false, [](const VerifyLine&) {});
  EXPECT_EQ(v.problems, 1) << "the shard whose experts the damaged file holds";
  pack_test::flip_bit(f.path, 100);

  // A drive gone, one copy: an error naming it, not the shards' zeros.
  fs::rename(d.root / "b", d.root / "b.away");
  std::string e = pack_test::error_of([&] { logits(dir, 0, false); });
  EXPECT_NE(e.find((d.root / "b").string()), std::string::npos) << e;
  EXPECT_NE(e.find("only copy"), std::string::npos) << e;
  v = verify_model(dir, /*repair=*/true, [](const VerifyLine&) {});
  EXPECT_EQ(v.problems, 1) << "the stripe; the shards are not hashed (their holes would fail)";
  SetupManifest after;
  ASSERT_TRUE(read_setup_manifest(dir, &after));
  EXPECT_EQ(after.files.size(), setup.files.size()) << "no shard dropped for setup to download over the holes";
  fs::rename(d.root / "b.away", d.root / "b");

  // Cut off while punching shard 0 (its time moved): refused until the next
  // `stripe --move` finishes it.
  Stripe cut = read_stripe(dir);
  nlohmann::json m = nlohmann::json::parse(read_regular_file(stripe_manifest_path(dir), 1 << 24));
  m["punching"] = 0;
  write_file_atomic(stripe_manifest_path(dir), m.dump());
  const std::string shard0 = ck.shard_paths[0];
  fs::last_write_time(shard0, fs::last_write_time(shard0) + std::chrono::seconds(5));
  e = pack_test::error_of([&] { logits(dir, 0, false); });
  EXPECT_NE(e.find("cut off"), std::string::npos) << e;
  EXPECT_FALSE(verify_stripe(ck).empty());
  const StripeResult finished = write_stripe(ck, d.two(1, 1), 1, {}, false, true);
  EXPECT_FALSE(finished.up_to_date);
  EXPECT_EQ(shard_stamps_differ(stamps, ck), "");
  EXPECT_EQ(read_stripe(dir).punching, -1);
  EXPECT_EQ(logits(dir, 0, false), want0);

  // A shard changed after the move: the stripe is stale over holes.
  fs::last_write_time(shard0, fs::last_write_time(shard0) + std::chrono::seconds(5));
  e = pack_test::error_of([&] { logits(dir, 0, false); });
  EXPECT_NE(e.find("holes"), std::string::npos) << e;
  EXPECT_NE(pack_test::error_of([&] { write_stripe(ck, d.two(1, 1)); }), "");
}

TEST(Stripe, DrivesListParsesWeightsAndRefusesBadOnes) {
  const auto d = parse_drives("/a:2,/b/,/c:0.5");
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].path, "/a");
  EXPECT_EQ(d[0].weight, 2);
  EXPECT_EQ(d[1].path, "/b");
  EXPECT_EQ(d[1].weight, 0);
  EXPECT_EQ(d[2].weight, 0.5);
  EXPECT_THROW(parse_drives("/a:x"), Error);
  EXPECT_THROW(parse_drives("/a:-1"), Error);
  EXPECT_THROW(parse_drives(""), Error);
}

}  // namespace
}  // namespace sluice
