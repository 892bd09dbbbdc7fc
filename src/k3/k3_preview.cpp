#include "k3/k3_preview.h"

#include <cstdio>

#include "base/error.h"
#include "k3/k3_config.h"
#include "k3/model.h"
#include "k3/placement.h"
#include "k3/spine.h"
#include "k3/step_mix.h"
#include "pack/int8.h"
#include "pack/pack.h"

namespace sluice {
namespace {

// The spine as the engine would bind it: the checkpoint's pack when there
// (lossless by default, int8 when asked; not with --spine bf16); a modelled
// one when lossless or int8 is asked for and there is no pack.
std::shared_ptr<const Pack> preview_pack(const Checkpoint& ck, const ModelOptions& o, double lossless_ratio,
                                         const std::string& ratio_basis, std::string* what) {
  const bool modelled_ok = o.spine == "lossless" || o.spine == "int8";
  std::shared_ptr<const Pack> pack;
  if (!layout_only(ck)) {
    const bool there = o.spine_pack.empty() ? pack_exists(ck, o.spine) : true;
    if (there || !modelled_ok) pack = open_spine_pack(ck, o.spine, o.spine_pack);
  }
  *what = pack ? std::string(spine_format_name(pack->format)) + " pack " + pack->path : "bf16";
  if (!pack && modelled_ok) {
    const Spine bf16(ck, o.spine_chunk_bytes);
    const SpineFormat f = parse_spine_format(o.spine);
    pack = std::make_shared<const Pack>(modelled_pack(bf16.matrix_sources(), f, lossless_ratio));
    char s[200];
    if (f == SpineFormat::int8)
      std::snprintf(s, sizeof s, "int8, modelled (int8 rows and group-of-%d scales, no pack here)", kInt8Group);
    else
      std::snprintf(s, sizeof s, "lossless, modelled at %.3f of bf16 (%s)", lossless_ratio, ratio_basis.c_str());
    *what = s;
  }
  return pack;
}

class K3Preview final : public ModelPreview {
 public:
  K3Preview(const Checkpoint& ck, const ModelOptions& o, double lossless_ratio, const std::string& ratio_basis)
      : ck_(ck), spine_(ck, o.spine_chunk_bytes, preview_pack(ck, o, lossless_ratio, ratio_basis, &what_)) {}

  const std::string& dense_what() const override { return what_; }
  double dense_bytes() const override {
    double b = 0;
    for (const PackSource& m : spine_.matrix_sources()) b += double(m.span.length);
    return b;
  }
  MemoryPlan plan(const ModelOptions& o) const override { return plan_memory(ck_, spine_, o); }
  StepMix step_mix(const MemoryPlan& p) const override { return sluice::step_mix(ck_.config, spine_, p.resident_pieces); }
  StepMix token_boundary_mix(const MemoryPlan& p) const override {
    return sluice::token_boundary_mix(ck_.config, spine_, p.resident_pieces);
  }
  PlacementRequest placement_request(const MemoryPlan& p) const override {
    return sluice::placement_request(ck_, spine_, p);
  }

 private:
  const Checkpoint& ck_;
  std::string what_;  // set while spine_ binds (declared first)
  Spine spine_;
};

}  // namespace

std::unique_ptr<ModelPreview> preview_k3(const Checkpoint& ck, const ModelOptions& o, double lossless_ratio,
                                         const std::string& ratio_basis) {
  return std::make_unique<K3Preview>(ck, o, lossless_ratio, ratio_basis);
}

Checkpoint k3_preset_checkpoint(const std::string& preset) {
  if (preset == "k31") return layout_checkpoint(k31_config(), "Kimi K3.1 Pro");
  if (preset == "k3") return layout_checkpoint(k3_config(), "Kimi K3");
  fail("--preset", "unknown preset " + preset + " (k3 or k31)");
}

}  // namespace sluice
