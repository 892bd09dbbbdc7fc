// Loader error paths: every damaged checkpoint gives an Error that names the
// file and the problem, never a crash. Damaged copies of the fixture model are
// made in a temp directory.
#include "checkpoint/checkpoint.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <sys/stat.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "arch/open.h"
#include "base/error.h"
#include "base/escape.h"
#include "k3/k3_config.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kFixture = std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/k3-tiny/model";

struct TempModel {
  fs::path dir;
  TempModel() {
    dir = fs::temp_directory_path() / ("sluice-ck-" + std::to_string(getpid()) + "-" +
                                       std::to_string(counter()++));
    fs::remove_all(dir);
    fs::copy(kFixture, dir);
  }
  ~TempModel() { fs::remove_all(dir); }
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::string path(const std::string& f) const { return (dir / f).string(); }
  std::string str() const { return dir.string(); }
};

std::string read_all(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_all(const std::string& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
}

// Splits a shard into its header JSON and data; rewrites it with a new header.
struct Shard {
  json header;
  std::string data;
  explicit Shard(const std::string& p) {
    std::string b = read_all(p);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | uint8_t(b[size_t(i)]);
    header = json::parse(b.substr(8, n));
    data = b.substr(8 + n);
  }
  void save(const std::string& p) const {
    std::string h = header.dump();
    std::string out(8, '\0');
    for (int i = 0; i < 8; i++) out[size_t(i)] = char((uint64_t(h.size()) >> (8 * i)) & 0xff);
    write_all(p, out + h + data);
  }
};

// Expects `f` to throw an Error whose message contains every piece of `want`.
template <typename F>
void expect_error(F f, std::initializer_list<std::string> want) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& w : want) EXPECT_NE(msg.find(w), std::string::npos) << "message: " << msg << "\nwant: " << w;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message must be one line: " << msg;
  }
}

const char* kShard1 = "model-00001-of-00003.safetensors";
const char* kShard2 = "model-00002-of-00003.safetensors";

TEST(Checkpoint, OpensFixtureAndIndexesExperts) {
  Checkpoint ck = open_checkpoint(kFixture);
  const ModelConfig& c = ck.config;
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.num_hidden_layers, 10);
  EXPECT_EQ(ck.shard_paths.size(), 3u);
  ASSERT_EQ(ck.experts.size(), 10u);
  EXPECT_TRUE(ck.experts[0].empty());
  const uint64_t span = c.expert_span_bytes();
  EXPECT_EQ(span, expert_layout(c).total);
  for (int l = 1; l < 10; l++) {
    ASSERT_EQ(ck.experts[size_t(l)].size(), 32u);
    for (int e = 0; e < 32; e++) {
      const FileSpan& s = ck.experts[size_t(l)][size_t(e)];
      EXPECT_EQ(s.length, span);
      const TensorInfo& w1 = ck.tensor("model.layers." + std::to_string(l) + ".block_sparse_moe.experts." +
                                       std::to_string(e) + ".w1.weight_packed");
      EXPECT_EQ(s.offset, w1.offset);
      EXPECT_EQ(s.file, w1.shard);
    }
  }
  // Shuffled order on disk: expert 2 does not follow expert 1.
  const auto& l1 = ck.experts[1];
  EXPECT_NE(l1[2].offset, l1[1].offset + span);
}

TEST(Checkpoint, RecognisesFullK3Dimensions) {
  json doc = json::parse(read_all(kFixture + "/config.json"));
  json& t = doc["text_config"];
  t["hidden_size"] = 7168, t["num_hidden_layers"] = 93, t["vocab_size"] = 163840, t["num_attention_heads"] = 96;
  t["num_key_value_heads"] = 96, t["num_experts"] = 896, t["num_experts_per_token"] = 16;
  t["routed_expert_hidden_size"] = 3584, t["moe_intermediate_size"] = 3072, t["intermediate_size"] = 33792;
  t["attn_res_block_size"] = 12, t["linear_attn_config"]["num_heads"] = 96, t["linear_attn_config"]["head_dim"] = 128;
  std::vector<int> kda, mla;
  for (int l = 1; l <= 93; l++) ((l % 4 == 0 || l == 93) ? mla : kda).push_back(l);
  t["linear_attn_config"]["kda_layers"] = kda;
  t["linear_attn_config"]["full_attn_layers"] = mla;
  t["bos_token_id"] = 163584, t["eos_token_id"] = 163586, t["pad_token_id"] = 163839;
  doc["bos_token_id"] = 163584, doc["eos_token_id"] = 163586, doc["pad_token_id"] = 163839;
  ModelConfig c = parse_model_config(doc, "config.json");
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.num_experts, 896);
  EXPECT_EQ(c.expert_span_bytes(), 17547264u);
  EXPECT_EQ(std::count(c.layer_kind.begin(), c.layer_kind.end(), LayerKind::MLA), 24);
}

TEST(Checkpoint, AcceptsFlatTextConfig) {
  json doc = json::parse(read_all(kFixture + "/config.json"));
  ModelConfig nested = parse_model_config(doc, "config.json");
  ModelConfig flat = parse_model_config(doc["text_config"], "config.json");
  EXPECT_EQ(flat.hidden_size, nested.hidden_size);
  EXPECT_EQ(flat.layer_kind, nested.layer_kind);
  EXPECT_EQ(flat.eos_token_id, nested.eos_token_id);
}

TEST(Checkpoint, BadConfigsAreNamed) {
  json base = json::parse(read_all(kFixture + "/config.json"));
  auto with = [&](auto edit) {
    json d = base;
    edit(d["text_config"]);
    return d;
  };
  expect_error([&] { parse_model_config(with([](json& t) { t.erase("hidden_size"); }), "config.json"); },
               {"config.json", "missing field 'text_config.hidden_size'"});
  expect_error([&] { parse_model_config(with([](json& t) { t["hidden_act"] = "gelu"; }), "config.json"); },
               {"config.json", "unsupported", "hidden_act", "gelu"});
  expect_error([&] { parse_model_config(with([](json& t) { t["hidden_size"] = "128"; }), "config.json"); },
               {"hidden_size", "must be an integer"});
  expect_error(
      [&] {
        parse_model_config(with([](json& t) { t["linear_attn_config"]["full_attn_layers"] = {4, 8}; }),
                           "config.json");
      },
      {"inconsistent schedule", "layer 10"});
  expect_error(
      [&] {
        parse_model_config(with([](json& t) { t["linear_attn_config"]["full_attn_layers"] = {3, 4, 8, 10}; }),
                           "config.json");
      },
      {"inconsistent schedule", "listed twice"});
  expect_error([&] { parse_model_config(with([](json& t) { t["routed_expert_hidden_size"] = 48; }), "config.json"); },
               {"multiples of the MXFP4 group"});
  expect_error([&] { parse_model_config(with([](json& t) { t["quantization_config"]["format"] = "nvfp4"; }),
                                        "config.json"); },
               {"unsupported", "nvfp4"});
  TempModel tm;
  write_all(tm.path("config.json"), "{ not json");
  expect_error([&] { open_checkpoint(tm.str()); }, {tm.path("config.json"), "not valid JSON"});
}

// Issue 38: config keys and tensors the engine does not implement are refused
// by name (a sparse-attention indexer would otherwise be skipped silently and
// the answers be wrong), unless allowed, when they are recorded for a warning.
// The published K3 config and harmless metadata pass.
TEST(Checkpoint, UnknownModelFeaturesAreRefusedByName) {
  const json base = json::parse(read_all(kFixture + "/config.json"));
  EXPECT_TRUE(parse_model_config(base, "config.json").ignored_features.empty());
  EXPECT_TRUE(parse_model_config(json::parse(kK3ConfigJson), "k3").ignored_features.empty());
  json harmless = base;
  harmless["vision_config"] = {{"patch_size", 14}};
  harmless["auto_map"] = {{"AutoConfig", "configuration_kimi.KimiK3Config"}};
  harmless["transformers_version"] = "4.57.1";
  harmless["torch_dtype"] = "bfloat16";
  harmless["text_config"]["initializer_range"] = 0.02;
  harmless["text_config"]["rope_theta"] = 50000.0;
  harmless["text_config"]["dsa_config"] = nullptr;  // null asks for nothing
  EXPECT_TRUE(parse_model_config(harmless, "config.json").ignored_features.empty());

  // K3.1 Pro's dsa_config (docs/k31-spec.md §1) is parsed; a key it does not know is refused by name.
  json dsa = base;
  dsa["architectures"] = {"KimiK31ForConditionalGeneration"};
  dsa["text_config"]["dsa_config"] = {{"index_n_heads", 64}, {"index_topk", 2048}, {"index_head_dim", 32},
                                      {"index_rope_dim", 64}};
  expect_error([&] { parse_model_config(dsa, "config.json"); },
               {"config.json: unsupported model feature 'index_rope_dim' (text_config.dsa_config.index_rope_dim",
                "--allow-unknown"});
  EXPECT_EQ(parse_model_config(dsa, "config.json", true).ignored_features,
            std::vector<std::string>{"text_config.dsa_config.index_rope_dim"});
  for (const char* k : {"index_n_heads", "index_topk", "index_head_dim"}) {
    json d = base;
    d["text_config"][k] = 64;
    expect_error([&] { parse_model_config(d, "config.json"); }, {std::string("unsupported model feature '") + k + "'"});
  }
  json la = base;
  la["text_config"]["linear_attn_config"]["use_short_conv_gate"] = true;
  expect_error([&] { parse_model_config(la, "config.json"); },
               {"'use_short_conv_gate' (text_config.linear_attn_config.use_short_conv_gate"});
  json kv = base;
  kv["text_config"]["quantization_config"]["kv_cache_scheme"] = {{"num_bits", 8}};
  expect_error([&] { parse_model_config(kv, "config.json"); }, {"unsupported model feature 'kv_cache_scheme'"});
  json root = base;
  root["speculative_heads"] = 2;
  expect_error([&] { parse_model_config(root, "config.json"); }, {"unsupported model feature 'speculative_heads'"});

  // A tensor no K3 layer has: an indexer's projection in an MLA layer (layer 3)
  // of a config without dsa_config.
  TempModel tm;
  const std::string extra = "language_model.model.layers.3.self_attn.indexer.wk.weight";
  const Checkpoint ck = open_checkpoint(tm.str());
  const std::string shard = ck.shard_paths[size_t(ck.tensor("model.layers.3.self_attn.o_proj.weight").shard)];
  Shard sh(shard);
  const uint64_t at = sh.data.size();
  sh.data += std::string(64, '\1');
  sh.header[extra] = {{"dtype", "BF16"}, {"shape", {4, 8}}, {"data_offsets", {at, at + 64}}};
  sh.save(shard);
  json index = json::parse(read_all(tm.path("model.safetensors.index.json")));
  index["weight_map"][extra] = fs::path(shard).filename().string();
  write_all(tm.path("model.safetensors.index.json"), index.dump());
  expect_error([&] { open_checkpoint(tm.str()); },
               {shard + ": unsupported model feature '" + extra + "' (a tensor the K3 forward pass does not use"});
  const Checkpoint allowed = open_checkpoint(tm.str(), {.allow_unknown = true});
  EXPECT_EQ(allowed.ignored_features, std::vector<std::string>{"tensor " + extra});
  EXPECT_EQ(allowed.find("model.layers.3.self_attn.indexer.wk.weight"), nullptr);
  EXPECT_EQ(allowed.tensors.size(), ck.tensors.size());
}

// K3.1 Pro (docs/k31-spec.md §1.2): dsa_config turns the variant on and is
// cross-checked against the layer schedule and the architecture name.
TEST(Checkpoint, DsaConfigIsParsedAndCrossChecked) {
  const json base = json::parse(read_all(kFixture + "/config.json"));  // MLA layers 4, 8, 10
  EXPECT_FALSE(parse_model_config(base, "config.json").dsa);
  json k31 = base;
  k31["architectures"] = {"KimiK31ForConditionalGeneration"};
  k31["model_type"] = "kimi_k31";
  k31["text_config"]["dsa_config"] = {{"index_n_heads", 4}, {"index_head_dim", 32}, {"index_topk", 16},
                                      {"dsa_layers", {4, 8, 10}}};
  const ModelConfig c = parse_model_config(k31, "config.json");
  EXPECT_TRUE(c.dsa);
  EXPECT_EQ(c.dsa_n_heads, 4);
  EXPECT_EQ(c.dsa_head_dim, 32);
  EXPECT_EQ(c.dsa_topk, 16);
  EXPECT_EQ(c.dsa_k_norm_eps, c.rms_norm_eps);
  for (int l = 0; l < c.num_hidden_layers; l++) EXPECT_EQ(c.is_dsa_layer(l), !c.is_kda_layer(l)) << l;
  // The cache grows by the latent row plus the indexer key on each MLA layer.
  EXPECT_EQ(c.cache_bytes_per_position(),
            parse_model_config(base, "config.json").cache_bytes_per_position() + 3 * 32 * sizeof(float));
  json absent = k31;
  absent["text_config"]["dsa_config"].erase("dsa_layers");
  EXPECT_EQ(parse_model_config(absent, "config.json").dsa_layer, c.dsa_layer);

  auto refused = [&](auto edit, std::initializer_list<std::string> want) {
    json d = k31;
    edit(d);
    expect_error([&] { parse_model_config(d, "config.json"); }, want);
  };
  refused([](json& d) { d["text_config"]["dsa_config"]["dsa_layers"] = {4, 8}; },
          {"dsa_config.dsa_layers' must list every full-attention layer"});
  refused([](json& d) { d["text_config"]["dsa_config"]["dsa_layers"] = {3, 4, 8, 10}; },
          {"dsa_layers' holds layer 3, which is not a full-attention layer"});
  refused([](json& d) { d["text_config"]["dsa_config"]["dsa_layers"] = {4, 8, 11}; }, {"outside 1..10"});
  refused([](json& d) { d["text_config"]["dsa_config"]["index_topk"] = 0; }, {"index_topk' must be positive"});
  refused([](json& d) { d["text_config"]["dsa_config"].erase("index_n_heads"); }, {"index_n_heads"});
  refused([](json& d) { d["architectures"] = {"KimiK3ForConditionalGeneration"}; },
          {"KimiK3ForConditionalGeneration but the config has text_config.dsa_config"});
  refused([](json& d) { d["text_config"].erase("dsa_config"); },
          {"KimiK31ForConditionalGeneration but text_config.dsa_config is missing"});
  refused([](json& d) { d["model_type"] = "kimi_k4"; }, {"expected kimi_k3 or kimi_k31"});
  refused(
      [](json& d) {
        json& dc = d["text_config"]["dsa_config"];
        dc["index_head_dim"] = dc["index_n_heads"] = 1 << 14;
      },
      {"index_n_heads x index_head_dim x q_lora_rank"});
}

TEST(Checkpoint, TruncatedShard) {
  TempModel tm;
  fs::resize_file(tm.path(kShard2), fs::file_size(tm.path(kShard2)) / 2);
  expect_error([&] { open_checkpoint(tm.str()); }, {tm.path(kShard2), "truncated"});
  fs::resize_file(tm.path(kShard2), 5);
  expect_error([&] { open_checkpoint(tm.str()); }, {tm.path(kShard2), "truncated"});
}

TEST(Checkpoint, BadHeader) {
  TempModel tm;
  std::string b = read_all(tm.path(kShard1));
  b[8] = '#';  // the JSON's opening brace
  write_all(tm.path(kShard1), b);
  expect_error([&] { open_checkpoint(tm.str()); }, {tm.path(kShard1), "not valid JSON"});
  b[7] = char(0x7f);  // absurd header length
  write_all(tm.path(kShard1), b);
  expect_error([&] { open_checkpoint(tm.str()); }, {tm.path(kShard1), "header length"});
}

TEST(Checkpoint, HeaderInconsistencies) {
  {  // shape x dtype != byte length
    TempModel tm;
    Shard s(tm.path(kShard1));
    for (auto it = s.header.begin(); it != s.header.end(); ++it)
      if (it.key() != "__metadata__") {
        (*it)["shape"][0] = (*it)["shape"][0].get<int>() + 1;
        break;
      }
    s.save(tm.path(kShard1));
    expect_error([&] { open_checkpoint(tm.str()); }, {tm.path(kShard1), "does not match shape x dtype"});
  }
  {  // overlapping tensors
    TempModel tm;
    Shard s(tm.path(kShard1));
    json* prev = nullptr;
    for (auto it = s.header.begin(); it != s.header.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      if (prev && (*prev)["dtype"] == (*it)["dtype"] && (*prev)["shape"] == (*it)["shape"]) {
        (*it)["data_offsets"] = (*prev)["data_offsets"];
        break;
      }
      prev = &*it;
    }
    s.save(tm.path(kShard1));
    expect_error([&] { open_checkpoint(tm.str()); }, {tm.path(kShard1), "overlap"});
  }
  {  // unknown dtype
    TempModel tm;
    Shard s(tm.path(kShard1));
    for (auto it = s.header.begin(); it != s.header.end(); ++it)
      if (it.key() != "__metadata__") {
        (*it)["dtype"] = "F8_E4M3";
        break;
      }
    s.save(tm.path(kShard1));
    expect_error([&] { open_checkpoint(tm.str()); }, {tm.path(kShard1), "unsupported dtype"});
  }
}

TEST(Checkpoint, WrongDtypeIsRefusedWhenBinding) {
  TempModel tm;
  Shard s(tm.path(kShard1));
  std::string victim;
  for (auto it = s.header.begin(); it != s.header.end(); ++it)
    if (it.key().find("q_proj.weight") != std::string::npos && (*it)["dtype"] == "BF16") {
      (*it)["dtype"] = "F16";  // same size: the header is consistent, the model is not
      victim = it.key();
      break;
    }
  ASSERT_FALSE(victim.empty());
  s.save(tm.path(kShard1));
  expect_error([&] { open_model(tm.str()); }, {tm.path(kShard1), victim, "dtype F16, expected BF16"});
}

TEST(Checkpoint, MissingTensor) {
  TempModel tm;
  json index = json::parse(read_all(tm.path("model.safetensors.index.json")));
  const std::string name = "language_model.model.layers.2.self_attn.o_proj.weight";
  const std::string file = index["weight_map"][name];
  // Renamed to a tensor sluice skips (its bytes stay covered: tensors must tile the data).
  Shard s(tm.path(file));
  s.header["vision_tower.renamed"] = s.header[name];
  s.header.erase(name);
  s.save(tm.path(file));
  index["weight_map"]["vision_tower.renamed"] = file;
  write_all(tm.path("model.safetensors.index.json"), index.dump());
  expect_error([&] { open_checkpoint(tm.str()); }, {name, "missing"});
  index["weight_map"].erase(name);
  write_all(tm.path("model.safetensors.index.json"), index.dump());
  expect_error([&] { open_model(tm.str()); }, {"missing tensor", name});
}

TEST(Checkpoint, MissingShard) {
  TempModel tm;
  fs::remove(tm.path(kShard2));
  expect_error([&] { open_checkpoint(tm.str()); }, {tm.path(kShard2), "missing"});
}

TEST(Checkpoint, NonContiguousExpert) {
  TempModel tm;
  json index = json::parse(read_all(tm.path("model.safetensors.index.json")));
  const std::string a = "language_model.model.layers.3.block_sparse_moe.experts.0.w3.weight_packed";
  const std::string b = "language_model.model.layers.3.block_sparse_moe.experts.1.w3.weight_packed";
  const std::string file = index["weight_map"][a];
  ASSERT_EQ(file, index["weight_map"][b].get<std::string>());
  Shard s(tm.path(file));
  std::swap(s.header[a]["data_offsets"], s.header[b]["data_offsets"]);
  s.save(tm.path(file));
  expect_error([&] { open_checkpoint(tm.str()); }, {tm.path(file), "layer 3", "not contiguous"});
}

TEST(Checkpoint, IndexAndShardDisagree) {
  TempModel tm;
  json index = json::parse(read_all(tm.path("model.safetensors.index.json")));
  const std::string name = "language_model.model.norm.weight";
  std::string other = index["weight_map"][name] == kShard1 ? kShard2 : kShard1;
  index["weight_map"][name] = other;
  write_all(tm.path("model.safetensors.index.json"), index.dump());
  expect_error([&] { open_checkpoint(tm.str()); }, {name, "listed in the index under"});
}

TEST(Checkpoint, NoModelDirectory) {
  expect_error([] { open_checkpoint("/nonexistent/model"); }, {"/nonexistent/model/config.json", "cannot open"});
}

// Hostile-input findings (issue 13): each was accepted, or cost gigabytes,
// before the check it tests.
TEST(Checkpoint, ConfigNumbersAreBoundedBeforeAnythingIsSized) {
  json base = json::parse(read_all(kFixture + "/config.json"));
  auto with = [&](auto edit) {
    json d = base;
    edit(d["text_config"]);
    return d;
  };
  expect_error([&] { parse_model_config(with([](json& t) { t["num_hidden_layers"] = 100000000; }), "config.json"); },
               {"config.json", "num_hidden_layers", "implausibly large"});
  expect_error([&] { parse_model_config(with([](json& t) { t["num_experts"] = 300000000; }), "config.json"); },
               {"config.json", "num_experts"});
  // 2^32 + 1 used to be read as layer 1.
  expect_error([&] {
    parse_model_config(with([](json& t) { t["linear_attn_config"]["kda_layers"][0] = 4294967297ull; }), "config.json");
  }, {"config.json", "kda_layers", "out of range"});
  // Products the size helpers form must not overflow an int.
  expect_error([&] {
    parse_model_config(with([](json& t) {
      t["linear_attn_config"]["num_heads"] = 1 << 20;
      t["linear_attn_config"]["head_dim"] = 1 << 20;
    }), "config.json");
  }, {"config.json", "implausibly large"});
  // Plausible per field, but more experts than the files hold: refused before the index is sized.
  TempModel tm;
  json d = with([](json& t) { t["num_experts"] = 60000; });
  write_all(tm.path("config.json"), d.dump());
  expect_error([&] { open_checkpoint(tm.str()); }, {tm.path("config.json"), "expert tensors"});
}

TEST(Checkpoint, TensorsMustTileTheDataRegion) {
  {  // bytes after the last tensor
    TempModel tm;
    fs::resize_file(tm.path(kShard2), fs::file_size(tm.path(kShard2)) + 4096);
    expect_error([&] { open_checkpoint(tm.str()); }, {tm.path(kShard2), "data region holds"});
  }
  {  // a gap: every offset moved up by 2, the file grown to match
    TempModel tm;
    Shard s(tm.path(kShard1));
    for (auto it = s.header.begin(); it != s.header.end(); ++it)
      if (it.key() != "__metadata__")
        for (auto& o : (*it)["data_offsets"]) o = o.get<uint64_t>() + 2;
    s.data = std::string(2, '\0') + s.data;
    s.save(tm.path(kShard1));
    expect_error([&] { open_checkpoint(tm.str()); }, {tm.path(kShard1), "belong to no tensor"});
  }
  {  // a nesting bomb for a header: refused without building it
    TempModel tm;
    std::string h(1 << 20, '[');
    std::string out(8, '\0');
    for (int i = 0; i < 8; i++) out[size_t(i)] = char((uint64_t(h.size()) >> (8 * i)) & 0xff);
    write_all(tm.path(kShard1), out + h);
    expect_error([&] { open_checkpoint(tm.str()); }, {tm.path(kShard1), "nested too deeply"});
  }
  {  // control characters in a tensor name are escaped, the message stays one line
    TempModel tm;
    Shard s(tm.path(kShard1));
    json renamed = json::object();
    for (auto it = s.header.begin(); it != s.header.end(); ++it)
      renamed[it.key() == "__metadata__" ? it.key() : "x\nsecond line\x1b[31mRED" + it.key()] = *it;
    s.header = renamed;
    s.save(tm.path(kShard1));
    try {
      open_checkpoint(tm.str());
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {  // as the CLI prints it
      const std::string printed = escape_control(e.what());
      EXPECT_NE(printed.find("x\\nsecond line\\x1b[31mRED"), std::string::npos) << printed;
      EXPECT_EQ(printed.find_first_of("\n\x1b"), std::string::npos) << printed;
    }
  }
}

TEST(Checkpoint, SpecialFilesAreRefusedNotHungOn) {
  TempModel tm;
  fs::remove(tm.path("config.json"));
  ASSERT_EQ(::mkfifo(tm.path("config.json").c_str(), 0644), 0);
  expect_error([&] { open_checkpoint(tm.str()); }, {tm.path("config.json"), "not a regular file"});
  fs::remove(tm.path("config.json"));
  fs::create_directory(tm.path("config.json"));
  expect_error([&] { open_checkpoint(tm.str()); }, {tm.path("config.json"), "directory"});
}

}  // namespace
}  // namespace sluice
