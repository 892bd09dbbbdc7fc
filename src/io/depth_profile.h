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
// "gbps": G, "by_depth": {"1": median GB/s, ...}, "rounds": {"1": [G, ...], ...}}}}. Written atomically (temp + rename).
#pragma once
#include <map>
#include <string>
#include <vector>

namespace sluice {

// Where profiles are kept (see above); empty when no home is known.
std::string depth_profile_path();

// The device that holds `file`, as "MAJ:MIN"; empty if it cannot be stat'ed.
std::string device_of(const std::string& file);

// The depth the engine reads at when no profile is saved for a disk.
constexpr int kUnprofiledQueueDepth = 16;

// GB/s measured at each depth, one value per round (rounds interleave the
// depths, so a disk whose rate drifts from minute to minute drifts for all).
using DepthRounds = std::map<int, std::vector<double>>;

// The depth to use. The unprofiled depth stays unless another depth beats it
// in every round (its slowest round faster than the default's fastest): one
// noisy sample must never move the engine, and the probe's lone reader is
// not the engine's load (the spine's loader and guesses read beside the
// experts). Among the depths that qualify, the shallowest whose median is
// within `tolerance` of the best median. Without the default among the
// depths, the shallowest within `tolerance` of the best median.
int choose_depth(const DepthRounds& rounds, double tolerance = 0.05);

// Records the measurement for `device` in the profile at `path` (other
// devices' entries kept); returns the depth chosen. Throws on a write error.
int save_depth_profile(const std::string& path, const std::string& device, const DepthRounds& rounds);

// The saved depth for the device holding `file`, or 0 when none is saved (or
// the profile is unreadable: a bad profile never stops a model from opening).
int saved_queue_depth(const std::string& file, const std::string& path = depth_profile_path());

// The saved O_DIRECT rate (GB/s at the chosen depth) of the device holding
// `file`, or 0 when none is saved (`sluice stripe` weighs drives by it).
double saved_gbps(const std::string& file, const std::string& path = depth_profile_path());

}  // namespace sluice
