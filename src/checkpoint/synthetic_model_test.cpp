// Checks synthetic checkpoints by parsing the written files directly (not
// through the checkpoint reader): layout, inventory, expert spans, values,
// determinism, and conformance with the k3-tiny fixture's layout.
#include "checkpoint/synthetic_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <unordered_map>

#include "base/error.h"
#include "base/numeric.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kFixture = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model/";

struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("sluice-mm-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ADD_FAILURE() << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json read_json(const std::string& path) { return json::parse(read_all(path)); }

// One shard as parsed here, independently of the library's reader.
struct Entry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};
struct Shard {
  std::string bytes;  // the whole file
  uint64_t data_start = 0;
  json metadata;
  std::map<std::string, Entry> entries;
  const uint8_t* data(const Entry& e) const {
    return reinterpret_cast<const uint8_t*>(bytes.data()) + data_start + e.begin;
  }
};

Shard parse_shard(const std::string& path) {
  Shard s;
  s.bytes = read_all(path);
  EXPECT_GE(s.bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | uint8_t(s.bytes[size_t(i)]);
  EXPECT_LE(8 + n, s.bytes.size()) << path;
  EXPECT_EQ((8 + n) % 8, 0u) << path;
  s.data_start = 8 + n;
  json h = json::parse(s.bytes.substr(8, n));
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      s.metadata = it.value();
      continue;
    }
    Entry e;
    e.name = it.key();
    e.dtype = it.value()["dtype"];
    e.shape = it.value()["shape"].get<std::vector<int64_t>>();
    e.begin = it.value()["data_offsets"][0];
    e.end = it.value()["data_offsets"][1];
    s.entries[e.name] = e;
  }
  return s;
}

std::string shard_name(int i, int n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", i, n);
  return buf;
}

uint64_t dtype_bytes(const std::string& d) {
  if (d == "BF16") return 2;
  if (d == "F32") return 4;
  if (d == "U8") return 1;
  ADD_FAILURE() << "unexpected dtype " << d;
  return 0;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

float f32_at(const uint8_t* p, size_t i) {
  float f;
  std::memcpy(&f, p + 4 * i, 4);
  return f;
}
float bf16_at(const uint8_t* p, size_t i) {
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return bf16_to_f32(h);
}

// Spec §7.3: 5 globals; per layer 6 common + 14 KDA or 8 MLA + 3 dense (layer 0)
// or 8 MoE spine + 6 per routed expert.
uint64_t spec_tensor_count(int layers, const std::set<int>& mla_1based, int experts) {
  uint64_t n = 5;
  for (int l = 0; l < layers; l++)
    n += 6 + (mla_1based.count(l + 1) ? 8 : 14) + (l == 0 ? 3 : 8 + 6 * uint64_t(experts));
  return n;
}

// config.json and tokenizer_config.json against the shape; returns the MLA
// layers (1-based) the schedule names.
std::set<int> check_config_files(const std::string& dir, const SyntheticShape& s) {
  json cfg = read_json(dir + "/config.json");
  EXPECT_EQ(cfg["model_type"], "kimi_k3");
  EXPECT_EQ(cfg["architectures"], json({"KimiK3ForConditionalGeneration"}));
  const json& t = cfg["text_config"];
  EXPECT_EQ(t["model_type"], "kimi_linear");
  EXPECT_EQ(t["hidden_size"], s.hidden);
  EXPECT_EQ(t["num_hidden_layers"], s.layers);
  EXPECT_EQ(t["vocab_size"], s.vocab);
  EXPECT_EQ(t["num_experts"], s.experts);
  EXPECT_EQ(t["num_experts_per_token"], s.top_k);
  EXPECT_EQ(t["routed_expert_hidden_size"], s.latent);
  EXPECT_EQ(t["moe_intermediate_size"], s.moe_inter);
  EXPECT_EQ(t["quantization_config"]["format"], "mxfp4-pack-quantized");
  EXPECT_EQ(t["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"], 32);
  const int first = s.vocab - s.reserved;
  EXPECT_EQ(t["bos_token_id"], first);
  EXPECT_EQ(t["eos_token_id"], first + 2);
  EXPECT_EQ(t["pad_token_id"], s.vocab - 1);
  EXPECT_EQ(cfg["bos_token_id"], t["bos_token_id"]);
  EXPECT_EQ(cfg["eos_token_id"], t["eos_token_id"]);
  EXPECT_EQ(cfg["pad_token_id"], t["pad_token_id"]);
  // The two schedule lists partition 1..L.
  std::set<int> kda, mla;
  for (int id : t["linear_attn_config"]["kda_layers"]) kda.insert(id);
  for (int id : t["linear_attn_config"]["full_attn_layers"]) mla.insert(id);
  EXPECT_EQ(kda.size() + mla.size(), size_t(s.layers));
  for (int id = 1; id <= s.layers; id++) EXPECT_EQ(kda.count(id) + mla.count(id), 1u) << "layer " << id;
  if (!s.mla_layers.empty()) {
    EXPECT_EQ(mla, std::set<int>(s.mla_layers.begin(), s.mla_layers.end()));
  }

  json tok = read_json(dir + "/tokenizer_config.json");
  EXPECT_EQ(tok["added_tokens_decoder"].size(), size_t(s.reserved));
  EXPECT_EQ(tok["added_tokens_decoder"][std::to_string(first)]["content"], "[BOS]");
  EXPECT_EQ(tok["added_tokens_decoder"][std::to_string(first + 2)]["content"], "<|end_of_msg|>");
  EXPECT_EQ(tok["added_tokens_decoder"][std::to_string(s.vocab - 1)]["content"], "[PAD]");
  return mla;
}

// Experts: six contiguous parts each, one contiguous run per layer in one
// shard, not in id order. `where`: each tensor's shard file.
void check_expert_layout(const SyntheticShape& s, std::map<std::string, Shard>& shards,
                         std::map<std::string, std::string>& where) {
  const uint64_t L = uint64_t(s.latent), I = uint64_t(s.moe_inter);
  const uint64_t w13 = I * L / 2 + I * L / 32, w2 = L * I / 2 + L * I / 32;
  const uint64_t span = 2 * w13 + w2;
  EXPECT_EQ(expert_span_bytes(s), span);
  const char* parts[6] = {"w1.weight_packed", "w1.weight_scale", "w2.weight_packed",
                          "w2.weight_scale",  "w3.weight_packed", "w3.weight_scale"};
  for (int l = 1; l < s.layers; l++) {
    std::string pre = "language_model.model.layers." + std::to_string(l) + ".block_sparse_moe.experts.";
    std::string file = where[pre + "0.w1.weight_packed"];
    ASSERT_FALSE(file.empty()) << "layer " << l;
    const Shard& sh = shards[file];
    std::vector<std::pair<uint64_t, int>> starts;
    for (int e = 0; e < s.experts; e++) {
      std::string ep = pre + std::to_string(e) + ".";
      uint64_t at = sh.entries.at(ep + parts[0]).begin;
      for (const char* part : parts) {
        ASSERT_EQ(where[ep + part], file) << ep + part;
        const Entry& en = sh.entries.at(ep + part);
        EXPECT_EQ(en.begin, at) << ep + part;
        at = en.end;
      }
      EXPECT_EQ(at - sh.entries.at(ep + parts[0]).begin, span);
      EXPECT_EQ(sh.entries.at(ep + "w1.weight_packed").shape, (std::vector<int64_t>{s.moe_inter, s.latent / 2}));
      EXPECT_EQ(sh.entries.at(ep + "w1.weight_scale").shape, (std::vector<int64_t>{s.moe_inter, s.latent / 32}));
      EXPECT_EQ(sh.entries.at(ep + "w2.weight_packed").shape, (std::vector<int64_t>{s.latent, s.moe_inter / 2}));
      EXPECT_EQ(sh.entries.at(ep + "w2.weight_scale").shape, (std::vector<int64_t>{s.latent, s.moe_inter / 32}));
      starts.push_back({sh.entries.at(ep + parts[0]).begin, e});
    }
    std::sort(starts.begin(), starts.end());
    bool in_id_order = true;
    for (size_t k = 0; k < starts.size(); k++) {
      if (k > 0) {
        EXPECT_EQ(starts[k].first, starts[k - 1].first + span) << "layer " << l;
      }
      in_id_order = in_id_order && starts[k].second == int(k);
    }
    if (s.experts >= 2) {
      EXPECT_FALSE(in_id_order) << "layer " << l << ": experts must be shuffled";
    }
  }
}

// Every structural property of a written checkpoint, checked from the files.
// The parsed shards, by file name, go to `out`.
void check_checkpoint(const std::string& dir, const SyntheticShape& s, std::map<std::string, Shard>* out = nullptr) {
  const std::set<int> mla = check_config_files(dir, s);

  json index = read_json(dir + "/model.safetensors.index.json");
  std::set<std::string> files;
  for (auto& [name, file] : index["weight_map"].items()) files.insert(file.get<std::string>());
  EXPECT_EQ(files.size(), size_t(s.shards));

  std::map<std::string, Shard> shards;
  uint64_t total = 0, count = 0;
  std::map<std::string, std::string> where;  // tensor -> shard, from the headers
  for (const std::string& f : files) {
    EXPECT_EQ(f, shard_name(std::stoi(f.substr(6, 5)), int(files.size()))) << f;
    Shard sh = parse_shard(dir + "/" + f);
    EXPECT_EQ(sh.metadata, json({{"format", "pt"}}));
    // Offsets: contiguous from 0, no gaps, no overlaps, ending at the file's end.
    std::vector<const Entry*> by_offset;
    for (auto& [name, e] : sh.entries) by_offset.push_back(&e);
    std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
    uint64_t pos = 0;
    for (const Entry* e : by_offset) {
      EXPECT_EQ(e->begin, pos) << e->name;
      uint64_t numel = 1;
      for (int64_t d : e->shape) numel *= uint64_t(d);
      EXPECT_EQ(e->end - e->begin, numel * dtype_bytes(e->dtype)) << e->name;
      pos = e->end;
      EXPECT_EQ(e->name.rfind("language_model.", 0), 0u) << e->name;
      // F32 exactly where K3 has F32, U8 for the experts, BF16 elsewhere.
      bool f32 = ends_with(e->name, ".A_log") || ends_with(e->name, ".dt_bias") ||
                 ends_with(e->name, "conv1d.weight") || ends_with(e->name, "o_norm.weight") ||
                 ends_with(e->name, "e_score_correction_bias");
      bool u8 = e->name.find(".experts.") != std::string::npos;
      EXPECT_EQ(e->dtype, f32 ? "F32" : u8 ? "U8" : "BF16") << e->name;
      where[e->name] = f;
    }
    EXPECT_EQ(sh.data_start + pos, sh.bytes.size()) << f;
    total += pos;
    count += sh.entries.size();
    shards[f] = std::move(sh);
  }
  EXPECT_EQ(index["metadata"]["total_size"], total);
  EXPECT_EQ(index["weight_map"].size(), where.size());
  for (auto& [name, file] : where) EXPECT_EQ(index["weight_map"].value(name, ""), file) << name;
  EXPECT_EQ(count, spec_tensor_count(s.layers, mla, s.experts));
  EXPECT_EQ(count, synthetic_tensor_count(s));

  check_expert_layout(s, shards, where);
  if (out) *out = std::move(shards);
}

// Value ranges the generator promises (spec §7 scales).
void check_values(const std::map<std::string, Shard>& shards, const SyntheticShape& s) {
  int alog = 0, scales = 0, biases = 0;
  for (const auto& [file, sh] : shards) {
    for (const auto& [name, e] : sh.entries) {
      const uint8_t* p = sh.data(e);
      uint64_t n = (e.end - e.begin) / dtype_bytes(e.dtype);
      if (ends_with(name, ".A_log")) {
        alog++;
        ASSERT_EQ(e.shape, (std::vector<int64_t>{s.kda_head_dim}));
        for (uint64_t i = 0; i < n; i++) {
          float v = f32_at(p, i);
          if (i < uint64_t(s.kda_heads)) {
            EXPECT_GT(v, 0.0f) << name << "[" << i << "]";
            EXPECT_LE(v, std::log(16.0f)) << name;
          } else {
            EXPECT_EQ(v, 0.0f) << name << "[" << i << "] must be zero padding";
          }
        }
      } else if (ends_with(name, ".dt_bias")) {
        for (uint64_t i = 0; i < n; i++) {
          EXPECT_GE(f32_at(p, i), -3.0f);
          EXPECT_LE(f32_at(p, i), -1.0f);
        }
      } else if (ends_with(name, "e_score_correction_bias")) {
        biases++;
        float lo = 1, hi = -1;
        for (uint64_t i = 0; i < n; i++) lo = std::min(lo, f32_at(p, i)), hi = std::max(hi, f32_at(p, i));
        EXPECT_GE(lo, -0.1f);
        EXPECT_LE(hi, 0.1f);
        if (n >= 8) {
          EXPECT_GT(hi - lo, 0.05f) << name << ": bias too flat to change any selection";
        }
      } else if (ends_with(name, "norm.weight")) {  // all norms, BF16 or F32
        for (uint64_t i = 0; i < n; i++) {
          float v = e.dtype == "F32" ? f32_at(p, i) : bf16_at(p, i);
          EXPECT_GE(v, 0.949f) << name;
          EXPECT_LE(v, 1.051f) << name;
        }
      } else if (ends_with(name, "weight_scale")) {
        scales++;
        // Three consecutive exponents, never 255, never 0.
        uint8_t lo = 255, hi = 0;
        for (uint64_t i = 0; i < n; i++) lo = std::min(lo, p[i]), hi = std::max(hi, p[i]);
        EXPECT_LE(hi - lo, 2) << name;
        EXPECT_LT(hi, 255) << name;
        EXPECT_GT(lo, 0) << name;
      }
    }
  }
  EXPECT_EQ(alog, s.layers - int(s.mla_layers.size()));
  EXPECT_EQ(biases, s.layers - 1);
  EXPECT_EQ(scales, (s.layers - 1) * s.experts * 3);
}

std::string write_model(const SyntheticShape& s, uint64_t seed, const std::string& dir) {
  SyntheticModel m = plan_synthetic_model(s, seed);
  write_synthetic_model(m, dir);
  return dir;
}

// The shape of spec §7.1 (different from the fixture's): hidden 64, 8 layers,
// MLA at 4, 7, 8, 16 experts top-4 in a 32-wide latent, intermediate 96.
SyntheticShape spec_tiny_shape() {
  SyntheticShape s;
  s.hidden = 64;
  s.layers = 8;
  s.heads = 4;
  s.kda_heads = 4;
  s.kda_head_dim = 32;
  s.q_lora = 48;
  s.kv_lora = 32;
  s.nope = 16;
  s.rope = 8;
  s.v_head = 32;
  s.experts = 16;
  s.top_k = 4;
  s.moe_inter = 96;
  s.latent = 32;
  s.dense_inter = 160;
  s.vocab = 512;
  s.reserved = 256;
  s.mla_layers = {4, 7, 8};
  s.shards = 2;
  return s;
}

TEST(SyntheticModel, TinyPresetIsValidCheckpoint) {
  TempDir dir;
  SyntheticShape s = tiny_preset();
  write_model(s, 1, dir.str());
  s.mla_layers = default_mla_layers(s.layers);
  std::map<std::string, Shard> shards;
  check_checkpoint(dir.str(), s, &shards);
  check_values(shards, s);
}

TEST(SyntheticModel, SpecSection7ShapeGives878Tensors) {
  TempDir dir;
  SyntheticShape s = spec_tiny_shape();
  EXPECT_EQ(expert_span_bytes(s), 4896u);
  EXPECT_EQ(synthetic_tensor_count(s), 878u);
  write_model(s, 5, dir.str());
  std::map<std::string, Shard> shards;
  check_checkpoint(dir.str(), s, &shards);
  check_values(shards, s);
  // Spot-check shapes of spec §7.3.
  const Shard* first = nullptr;
  for (auto& [f, sh] : shards)
    if (sh.entries.count("language_model.model.layers.3.self_attn.kv_b_proj.weight")) first = &sh;
  ASSERT_NE(first, nullptr);
  auto shape = [&](const std::string& n) { return first->entries.at("language_model.model.layers." + n).shape; };
  EXPECT_EQ(shape("3.self_attn.kv_b_proj.weight"), (std::vector<int64_t>{192, 32}));
  EXPECT_EQ(shape("3.self_attn.kv_a_proj_with_mqa.weight"), (std::vector<int64_t>{40, 64}));
  EXPECT_EQ(shape("3.self_attn.q_b_proj.weight"), (std::vector<int64_t>{96, 48}));
  EXPECT_EQ(shape("0.self_attn.q_conv1d.weight"), (std::vector<int64_t>{128, 1, 4}));
  EXPECT_EQ(shape("0.self_attn.f_a_proj.weight"), (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(shape("0.mlp.down_proj.weight"), (std::vector<int64_t>{64, 160}));
  EXPECT_EQ(shape("1.block_sparse_moe.shared_experts.gate_proj.weight"), (std::vector<int64_t>{192, 64}));
  EXPECT_EQ(shape("1.block_sparse_moe.routed_expert_up_proj.weight"), (std::vector<int64_t>{64, 32}));
}

TEST(SyntheticModel, OtherShapesAndShardCounts) {
  struct Case {
    const char* what;
    SyntheticShape s;
  };
  std::vector<Case> cases;
  {
    SyntheticShape s = tiny_preset();
    s.shards = 1;
    s.experts = 2;
    s.top_k = 1;
    s.mla_layers = {1, 2, 10};  // MLA on the dense layer too
    cases.push_back({"one shard, 2 experts", s});
  }
  {
    SyntheticShape s = tiny_preset();
    s.layers = 5;
    s.shards = 5;
    s.experts = 12;
    s.reserved = 100;  // odd reserved count: <osagent_mode> at +65 fits
    s.vocab = 600;
    s.latent = 96;
    s.moe_inter = 64;
    s.kda_heads = 3;
    s.kda_head_dim = 16;
    s.mla_layers = {};
    cases.push_back({"shard per layer", s});
  }
  {
    SyntheticShape s = tiny_preset();
    s.layers = 1;
    s.shards = 1;
    cases.push_back({"single dense layer", s});
  }
  for (auto& c : cases) {
    SCOPED_TRACE(c.what);
    TempDir dir;
    write_model(c.s, 11, dir.str());
    SyntheticShape s = c.s;
    if (s.mla_layers.empty()) s.mla_layers = default_mla_layers(s.layers);
    std::map<std::string, Shard> shards;
  check_checkpoint(dir.str(), s, &shards);
    check_values(shards, s);
  }
}

TEST(SyntheticModel, SameSeedSameBytesOtherSeedOtherBytes) {
  TempDir a, b, c;
  SyntheticShape s = spec_tiny_shape();
  write_model(s, 42, a.str());
  write_model(s, 42, b.str());
  write_model(s, 43, c.str());
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(a.path)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names.size(), 6u);  // 2 shards, index, config, tiktoken.model, tokenizer_config
  for (const std::string& n : names) {
    std::string x = read_all((a.path / n).string());
    EXPECT_EQ(x, read_all((b.path / n).string())) << n;
    std::string y = read_all((c.path / n).string());
    if (n.rfind("model-", 0) == 0) {
      EXPECT_NE(x, y) << n;
    } else {
      // Config, tokenizer config and index do not depend on the seed; nor does
      // a vocabulary of byte tokens only (512 - 256 reserved).
      EXPECT_EQ(x, y) << n;
    }
  }
  // Different seeds also change the expert order and every weight tensor.
  auto sa = parse_shard((a.path / "model-00001-of-00002.safetensors").string());
  auto sc = parse_shard((c.path / "model-00001-of-00002.safetensors").string());
  int differing_order = 0, same_bytes = 0;
  for (auto& [name, e] : sa.entries) {
    const Entry& f = sc.entries.at(name);
    differing_order += e.begin != f.begin;
    same_bytes += std::memcmp(sa.data(e), sc.data(f), e.end - e.begin) == 0;
  }
  EXPECT_GT(differing_order, 0);
  EXPECT_EQ(same_bytes, 0);
}

// The tiny preset is the k3-tiny fixture's shape: same config, tokenizer config,
// tensor names, dtypes, shapes and shard assignment (only weights and expert
// order differ).
TEST(SyntheticModel, TinyPresetMatchesFixtureLayout) {
  TempDir dir;
  write_model(tiny_preset(), 3, dir.str());
  const std::string d = dir.str() + "/";
  EXPECT_EQ(read_json(d + "config.json"), read_json(kFixture + "config.json"));
  EXPECT_EQ(read_json(d + "tokenizer_config.json"), read_json(kFixture + "tokenizer_config.json"));
  json ours = read_json(d + "model.safetensors.index.json"), theirs = read_json(kFixture + "model.safetensors.index.json");
  EXPECT_EQ(ours["weight_map"], theirs["weight_map"]);
  EXPECT_EQ(ours["metadata"]["total_size"], theirs["metadata"]["total_size"]);
  for (int i = 1; i <= 3; i++) {
    std::string f = "model-0000" + std::to_string(i) + "-of-00003.safetensors";
    Shard a = parse_shard(d + f), b = parse_shard(kFixture + f);
    EXPECT_EQ(a.bytes.size(), b.bytes.size()) << f;
    ASSERT_EQ(a.entries.size(), b.entries.size()) << f;
    for (auto& [name, e] : b.entries) {
      ASSERT_TRUE(a.entries.count(name)) << name;
      EXPECT_EQ(a.entries[name].dtype, e.dtype) << name;
      EXPECT_EQ(a.entries[name].shape, e.shape) << name;
    }
  }
  // The 256 byte tokens come in tiktoken's order, as in the fixture.
  std::istringstream x(read_all(d + "tiktoken.model")), y(read_all(kFixture + "tiktoken.model"));
  std::string lx, ly;
  for (int r = 0; r < 256; r++) {
    ASSERT_TRUE(std::getline(x, lx) && std::getline(y, ly));
    EXPECT_EQ(lx, ly) << "rank " << r;
  }
}

std::string unbase64(const std::string& in) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    int v = val(c);
    EXPECT_GE(v, 0) << in;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xff);
    }
  }
  return out;
}

TEST(SyntheticModel, TiktokenMergesAreValidBpe) {
  const int ranks = 3000;
  std::istringstream in(make_tiktoken_model(ranks, 9));
  std::unordered_map<std::string, int> rank_of;
  std::vector<std::string> tokens;
  std::string line;
  while (std::getline(in, line)) {
    size_t sp = line.find(' ');
    ASSERT_NE(sp, std::string::npos) << line;
    EXPECT_EQ(std::stoi(line.substr(sp + 1)), int(tokens.size()));
    std::string tok = unbase64(line.substr(0, sp));
    EXPECT_TRUE(rank_of.emplace(tok, int(tokens.size())).second) << "duplicate token at rank " << tokens.size();
    tokens.push_back(tok);
  }
  ASSERT_EQ(tokens.size(), size_t(ranks));
  for (int r = 0; r < 256; r++) EXPECT_EQ(tokens[r].size(), 1u);
  for (int r = 256; r < ranks; r++) {
    const std::string& t = tokens[r];
    bool split = false;  // some split into two lower-ranked tokens
    for (size_t k = 1; k < t.size() && !split; k++) {
      auto a = rank_of.find(t.substr(0, k)), b = rank_of.find(t.substr(k));
      split = a != rank_of.end() && b != rank_of.end() && a->second < r && b->second < r;
    }
    EXPECT_TRUE(split) << "rank " << r << " '" << t << "'";
  }
  EXPECT_EQ(make_tiktoken_model(ranks, 9), make_tiktoken_model(ranks, 9));
  EXPECT_NE(make_tiktoken_model(ranks, 9), make_tiktoken_model(ranks, 10));
}

TEST(SyntheticModel, ReservedNamesFollowK3) {
  // Real K3: 256 reserved from 163584.
  const int R = 256, first = 163584;
  auto name = [&](int id) { return reserved_token_name(id - first, R, id); };
  EXPECT_EQ(name(163584), "[BOS]");
  EXPECT_EQ(name(163585), "[EOS]");
  EXPECT_EQ(name(163586), "<|end_of_msg|>");
  EXPECT_EQ(name(163587), "<|open|>");
  EXPECT_EQ(name(163588), "<|close|>");
  EXPECT_EQ(name(163589), "<|sep|>");
  EXPECT_EQ(name(163590), "[start_header_id]");
  EXPECT_EQ(name(163591), "[end_header_id]");
  EXPECT_EQ(name(163592), "<|reserved_token_163592|>");
  EXPECT_EQ(name(163593), "[EOT]");
  EXPECT_EQ(name(163602), "<|media_begin|>");
  EXPECT_EQ(name(163603), "<|media_content|>");
  EXPECT_EQ(name(163604), "<|media_end|>");
  EXPECT_EQ(name(163605), "<|media_pad|>");
  EXPECT_EQ(name(163649), "<osagent_mode>");
  EXPECT_EQ(name(163838), "[UNK]");
  EXPECT_EQ(name(163839), "[PAD]");
  // The fixture's 64: [UNK] and [PAD] last, no room for <osagent_mode>.
  EXPECT_EQ(reserved_token_name(62, 64, 510), "[UNK]");
  EXPECT_EQ(reserved_token_name(63, 64, 511), "[PAD]");
  for (int k = 0; k < 64; k++) EXPECT_NE(reserved_token_name(k, 64, 448 + k), "<osagent_mode>");
  SyntheticShape k3 = k3_slice_preset(2, 2);
  json tc = make_tokenizer_config(k3);
  EXPECT_EQ(tc["added_tokens_decoder"].size(), 256u);
  EXPECT_EQ(tc["added_tokens_decoder"]["163649"]["content"], "<osagent_mode>");
  EXPECT_EQ(tc["num_reserved_special_tokens"], 256);
}

TEST(SyntheticModel, BadOptionsAreClearErrors) {
  auto error_of = [](SyntheticShape s) -> std::string {
    try {
      plan_synthetic_model(s, 1);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  auto expect_error = [&](SyntheticShape s, const std::string& needle) {
    std::string msg = error_of(s);
    EXPECT_NE(msg.find(needle), std::string::npos) << "message: '" << msg << "', expected '" << needle << "'";
  };
  SyntheticShape s = tiny_preset();
  s.latent = 48;
  expect_error(s, "latent 48 must be a multiple of 32");
  s = tiny_preset();
  s.moe_inter = 40;
  expect_error(s, "moe-inter 40");
  s = tiny_preset();
  s.mla_layers = {4, 11};
  expect_error(s, "mla-layers holds 11");
  s = tiny_preset();
  s.mla_layers = {4, 4};
  expect_error(s, "twice");
  s = tiny_preset();
  s.mla_layers = {0};
  expect_error(s, "mla-layers holds 0");
  s = tiny_preset();
  s.shards = 11;
  expect_error(s, "shards 11 exceeds layers 10");
  s = tiny_preset();
  s.top_k = 33;
  expect_error(s, "top-k 33 exceeds experts 32");
  s = tiny_preset();
  s.reserved = 8;
  expect_error(s, "reserved 8");
  s = tiny_preset();
  s.vocab = 300;
  expect_error(s, "fewer than the 256 byte tokens");
  s = tiny_preset();
  s.kda_heads = 40;
  expect_error(s, "kda-heads 40 exceeds kda-head-dim 32");
  s = tiny_preset();
  s.hidden = 0;
  expect_error(s, "hidden must be positive");
  s = tiny_preset();
  s.routed_scaling_factor = -1;
  expect_error(s, "scaling-factor");
}

TEST(SyntheticModel, RefusesNonEmptyDirectoryUnlessOverwrite) {
  TempDir dir;
  SyntheticShape s = tiny_preset();
  s.layers = 2;
  s.shards = 2;
  s.mla_layers = {};
  write_model(s, 1, dir.str());
  SyntheticModel m = plan_synthetic_model(s, 2);
  EXPECT_THROW(write_synthetic_model(m, dir.str()), Error);
  // Overwriting with fewer shards removes the stale ones.
  s.shards = 1;
  WriteModelOptions opt;
  opt.overwrite = true;
  write_synthetic_model(plan_synthetic_model(s, 2), dir.str(), opt);
  EXPECT_FALSE(fs::exists(dir.path / "model-00002-of-00002.safetensors"));
  s.mla_layers = default_mla_layers(s.layers);
  check_checkpoint(dir.str(), s);
}

TEST(SyntheticModel, RefusesWhenTheDiskIsTooSmall) {
  // ~30 TB of embedding and head: more than any test machine has free.
  SyntheticShape s = k3_slice_preset(1, 1);
  s.vocab = 2000000000;
  SyntheticModel m = plan_synthetic_model(s, 1);
  ASSERT_GT(m.shard_bytes(), 50ull << 40);
  TempDir dir;
  std::string target = dir.str() + "/huge";
  try {
    write_synthetic_model(m, target);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("are free"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(target));  // refused before creating anything
}

// ---- Activation scale: would a forward pass stay O(1)? ----------------------

// RMS of W·x for a ±1 input (RMS 1), over the first `rows` rows of W.
double rms_of_product(const std::function<float(size_t r, size_t c)>& w, size_t rows, size_t cols) {
  double sum = 0;
  for (size_t r = 0; r < rows; r++) {
    double y = 0;
    for (size_t c = 0; c < cols; c++) y += double(w(r, c)) * ((c * 2654435761u >> 7) & 1 ? 1.0 : -1.0);
    sum += y * y;
  }
  return std::sqrt(sum / double(rows));
}

std::vector<uint8_t> generate_tensor(const TensorData& t, uint64_t max_bytes = ~0ull) {
  uint64_t n = std::min(t.nbytes(), max_bytes);
  std::vector<uint8_t> out(n);
  for (uint64_t off = 0; off < n; off += kFillChunk)
    t.fill(std::span<uint8_t>(out.data() + off, size_t(std::min<uint64_t>(kFillChunk, n - off))), off);
  return out;
}

const TensorData& find_tensor(const SyntheticModel& m, const std::string& name) {
  for (const ShardPlan& sh : m.shards)
    for (const TensorData& t : sh.tensors)
      if (t.name == name) return t;
  throw Error("no tensor " + name);
}

void check_scales(const SyntheticModel& m) {
  const SyntheticShape& s = m.shape;
  const std::string ex = "language_model.model.layers.1.block_sparse_moe.experts.1.";
  for (const char* w : {"w1", "w2"}) {
    SCOPED_TRACE(w);
    const TensorData& packed = find_tensor(m, ex + w + ".weight_packed");
    const TensorData& scale = find_tensor(m, ex + w + ".weight_scale");
    std::vector<uint8_t> q = generate_tensor(packed), sc = generate_tensor(scale);
    size_t rows = size_t(packed.shape[0]), cols = size_t(packed.shape[1]) * 2;
    auto deq = [&](size_t r, size_t c) {
      uint8_t byte = q[r * cols / 2 + c / 2];
      return kE2M1[c % 2 ? byte >> 4 : byte & 15] * e8m0_to_f32(sc[r * cols / 32 + c / 32]);
    };
    double rms = rms_of_product(deq, std::min<size_t>(rows, 64), cols);
    EXPECT_GT(rms, 0.3) << "expert output vanishes";
    EXPECT_LT(rms, 3.0) << "expert output blows up";
  }
  // A BF16 projection: std 1/sqrt(fan_in) gives RMS ~1.
  const TensorData& qp = find_tensor(m, "language_model.model.layers.0.self_attn.q_proj.weight");
  std::vector<uint8_t> b = generate_tensor(qp, 1 << 20);
  size_t cols = size_t(s.hidden), rows = std::min<size_t>(b.size() / 2 / cols, 64);
  double rms = rms_of_product([&](size_t r, size_t c) { return bf16_at(b.data(), r * cols + c); }, rows, cols);
  EXPECT_GT(rms, 0.7);
  EXPECT_LT(rms, 1.4);
}

TEST(SyntheticModel, ActivationScaleTiny) { check_scales(plan_synthetic_model(tiny_preset(), 4)); }

// ---- k3-slice: real K3 sizes, checked without writing 8 GB -----------------

TEST(SyntheticModel, K3SliceSizes) {
  SyntheticShape s = k3_slice_preset(2, 2);
  EXPECT_EQ(expert_span_bytes(s), 17547264u);  // spec §2.8
  SyntheticModel m = plan_synthetic_model(s, 1);
  ASSERT_EQ(m.shards.size(), 2u);  // layer l in shard l+1
  EXPECT_EQ(m.shards[0].file_name, "model-00001-of-00002.safetensors");
  EXPECT_EQ(m.config["text_config"]["linear_attn_config"]["full_attn_layers"], json({2}));
  EXPECT_EQ(m.config["text_config"]["vocab_size"], 163840);
  EXPECT_EQ(m.config["text_config"]["bos_token_id"], 163584);
  EXPECT_EQ(m.config["text_config"]["eos_token_id"], 163586);
  EXPECT_EQ(m.config["text_config"]["pad_token_id"], 163839);
  EXPECT_EQ(m.config["media_placeholder_token_id"], 163605);

  // Data bytes from the parameter counts of spec §2.4-2.11.
  const uint64_t embed = 163840ull * 7168 * 2;
  const uint64_t common = 43008ull * 2;                            // norm / AttnRes vectors
  const uint64_t kda = 443740416ull * 2 + (3 * 12288 * 4 + 128 + 12288 + 128) * 2;  // F32 ones at 4 bytes
  const uint64_t dense = 726663168ull * 2;
  const uint64_t mla = 232196096ull * 2;
  const uint64_t E = 2;
  const uint64_t moe_spine = (189927808ull - 896 * 7168 - 896) * 2 + E * 7168 * 2 + E * 4;
  const uint64_t experts = E * 17547264ull;
  const uint64_t tail = embed + 3 * 7168 * 2;  // lm_head, norm, output_attn_res_{norm,proj}
  EXPECT_EQ(m.shards[0].layout.data_size, embed + common + kda + dense);
  EXPECT_EQ(m.shards[1].layout.data_size, common + mla + moe_spine + experts + tail);
  for (const ShardPlan& sh : m.shards) {
    EXPECT_EQ(sh.layout.file_size(), 8 + sh.layout.header.size() + sh.layout.data_size);
    json h = json::parse(sh.layout.header);  // the header parses
    EXPECT_EQ(h.size(), sh.tensors.size() + 1);
  }
  EXPECT_EQ(synthetic_tensor_count(m.shape), 5 + 23 + 22 + 12u);

  // The two experts of layer 1 are one contiguous run of 2 spans.
  const ShardPlan& sh = m.shards[1];
  std::vector<uint64_t> starts;
  for (size_t i = 0; i < sh.tensors.size(); i++)
    if (ends_with(sh.tensors[i].name, "w1.weight_packed")) starts.push_back(sh.layout.begin[i]);
  ASSERT_EQ(starts.size(), 2u);
  std::sort(starts.begin(), starts.end());
  EXPECT_EQ(starts[1] - starts[0], 17547264u);
}

TEST(SyntheticModel, ActivationScaleK3) { check_scales(plan_synthetic_model(k3_slice_preset(2, 2), 4)); }

TEST(SyntheticModel, K3SliceSchedule) {
  EXPECT_EQ(default_mla_layers(10), (std::vector<int>{4, 8, 10}));
  EXPECT_EQ(default_mla_layers(8), (std::vector<int>{4, 8}));
  EXPECT_EQ(default_mla_layers(2), (std::vector<int>{2}));
  std::vector<int> full = default_mla_layers(93);
  EXPECT_EQ(full.size(), 24u);
  EXPECT_EQ(full.back(), 93);
  EXPECT_EQ(full[full.size() - 2], 92);
  SyntheticModel m = plan_synthetic_model(k3_slice_preset(5, 3), 1);
  EXPECT_EQ(m.shards.size(), 5u);
  EXPECT_EQ(synthetic_tensor_count(m.shape), spec_tensor_count(5, {4, 5}, 3));
}

// ---- The CLI ----------------------------------------------------------------

int run_cli(const std::string& args, std::string* output) {
  std::string cmd = std::string(SLUICE_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  int rc = pclose(p);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(MakeModelCli, WritesTinyModel) {
  TempDir dir;
  std::string out;
  std::string target = dir.str() + "/m";
  ASSERT_EQ(run_cli("make-model --preset tiny --seed 3 --out " + target, &out), 0) << out;
  SyntheticShape s = tiny_preset();
  s.mla_layers = default_mla_layers(s.layers);
  check_checkpoint(target, s);
  // Same seed through the library: identical bytes.
  TempDir lib;
  write_model(tiny_preset(), 3, lib.str());
  for (const char* f : {"model-00002-of-00003.safetensors", "tiktoken.model", "config.json"})
    EXPECT_EQ(read_all(target + "/" + f), read_all(lib.str() + "/" + f)) << f;
  // A second run into the same directory needs --force.
  out.clear();
  EXPECT_NE(run_cli("make-model --preset tiny --seed 3 --out " + target, &out), 0);
  EXPECT_NE(out.find("not empty"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(run_cli("make-model --preset tiny --seed 4 --force --out " + target, &out), 0) << out;
}

TEST(MakeModelCli, ShapeOptions) {
  TempDir dir;
  std::string out, target = dir.str() + "/m";
  ASSERT_EQ(run_cli("make-model --seed 2 --out " + target +
                        " --hidden 64 --layers 8 --heads 4 --kda-heads 4 --kda-head-dim 32 --q-lora 48 --kv-lora 32"
                        " --nope 16 --rope 8 --v-head 32 --experts 16 --top-k 4 --moe-inter 96 --latent 32 --shared 2"
                        " --dense-inter 160 --block 3 --vocab 512 --reserved 256 --mla-layers 4,7,8 --shards 2"
                        " --scaling-factor 2.5",
                    &out),
            0)
      << out;
  check_checkpoint(target, spec_tiny_shape());
  json cfg = read_json(target + "/config.json");
  EXPECT_EQ(cfg["text_config"]["routed_scaling_factor"], 2.5);
  EXPECT_EQ(cfg["text_config"]["attn_res_block_size"], 3);
  EXPECT_EQ(cfg["text_config"]["intermediate_size"], 160);
}

TEST(MakeModelCli, ErrorsAndDryRun) {
  TempDir dir;
  std::string out;
  EXPECT_NE(run_cli("make-model --latent 48 --out " + dir.str() + "/x", &out), 0);
  EXPECT_NE(out.find("sluice: make-model: latent 48 must be a multiple of 32"), std::string::npos) << out;
  out.clear();
  EXPECT_NE(run_cli("make-model --mla-layers 3,12 --out " + dir.str() + "/x", &out), 0);
  EXPECT_NE(out.find("mla-layers holds 12"), std::string::npos) << out;
  out.clear();
  EXPECT_NE(run_cli("make-model --preset k3-slice --out " + dir.str() + "/x", &out), 0);
  EXPECT_NE(out.find("needs --layers and --experts"), std::string::npos) << out;
  out.clear();
  EXPECT_FALSE(fs::exists(dir.path / "x"));
  ASSERT_EQ(run_cli("make-model --preset k3-slice --layers 2 --experts 2 --dry-run", &out), 0) << out;
  EXPECT_NE(out.find("expert span 17547264 bytes"), std::string::npos) << out;
  SyntheticModel m = plan_synthetic_model(k3_slice_preset(2, 2), 1);
  EXPECT_NE(out.find(std::to_string(m.shards[1].layout.file_size()) + " bytes"), std::string::npos) << out;
  // Fewer layers than the tiny preset's 3 shards, fewer experts than its top-4:
  // the defaults follow.
  out.clear();
  ASSERT_EQ(run_cli("make-model --layers 2 --experts 2 --dry-run", &out), 0) << out;
  EXPECT_NE(out.find("2 layers, 2 experts/layer, 2 shards"), std::string::npos) << out;
}

}  // namespace
}  // namespace sluice
