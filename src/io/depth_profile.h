// io/depth_profile.h — the read depth a disk wants, measured once and kept.
//
// How many reads in flight a device serves best differs by orders of
// magnitude (a rate-limited virtual disk loses bandwidth beyond ~16 x 4 MiB,
// NVMe wants far more), and probing it costs seconds, so `sluice probe --save`
// measures it and records it per device (st_dev of the probed file) in a small
// JSON file; the engine reads it when its queue depth is left to "auto".
//
// File: $SLUICE_DEPTH_PROFILE, else $XDG_CACHE_HOME/sluice/io-depth.json, else
// ~/.cache/sluice/io-depth.json: {"devices": {"MAJ:MIN": {"queue_depth": N,
// "gbps": G, "by_depth": {"1": G1, ...}}}}. Written atomically (temp + rename).
#pragma once
#include <map>
#include <string>

namespace sluice {

// Where profiles are kept (see above); empty when no home is known.
std::string depth_profile_path();

// The device that holds `file`, as "MAJ:MIN"; empty if it cannot be stat'ed.
std::string device_of(const std::string& file);

// The depth to use given GB/s measured per depth: the smallest depth within
// `tolerance` (a fraction) of the best rate, since extra depth that buys
// nothing only adds contention (the spine's loader reads beside the experts).
int choose_depth(const std::map<int, double>& gbps_by_depth, double tolerance = 0.05);

// Records the measurement for `device` in the profile at `path` (other
// devices' entries kept); returns the depth chosen. Throws on a write error.
int save_depth_profile(const std::string& path, const std::string& device, const std::map<int, double>& gbps_by_depth);

// The saved depth for the device holding `file`, or 0 when none is saved (or
// the profile is unreadable: a bad profile never stops a model from opening).
int saved_queue_depth(const std::string& file, const std::string& path = depth_profile_path());

}  // namespace sluice
