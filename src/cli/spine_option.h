// cli/spine_option.h — the --spine option of every command that opens a model.
#pragma once
#include <string>

#include <CLI/CLI.hpp>

namespace sluice::cli {

inline void add_spine_option(CLI::App& sub, std::string& spine) {
  sub.add_option("--spine", spine,
                 "Spine copy to read: bf16 (the shards), lossless (its pack, bit-identical), int8 (its pack, "
                 "lossy: docs/packs.md) (default: lossless when DIR/spine.lossless.pack exists, else bf16)")
      ->check(CLI::IsMember({"bf16", "lossless", "int8"}));
}

// --spine-pack FILE: a pack kept outside the model folder (one that is
// read-only or shared); it must hold the --spine format and match the model.
inline void add_spine_pack_option(CLI::App& sub, std::string& file) {
  sub.add_option("--spine-pack", file,
                 "Pack file to read instead of DIR/spine.<format>.pack (made by `sluice pack --out FILE`); it holds "
                 "the --spine format (default lossless) and is checked against the model");
}

}  // namespace sluice::cli
