// io/stripe.h — a model's routed experts laid over several drives.
//
// `sluice stripe` copies every routed expert span (one read each, never
// split) to one of the drives, in proportion to the drives' weights (their
// O_DIRECT rates), so a token's expert reads spread over every drive and the
// model reads at the sum of their bandwidths. Per drive and MoE layer one file,
//   DRIVE/sluice-stripe-<model folder name>/L<layer>.<key>.spans
// holds that layer's experts placed there, each at a 4096-aligned stride
// (one O_DIRECT read, no bounce), then a 16-byte trailer: u64 FNV-1a of the
// span bytes, "SLSTRIP1". <key> hashes the shards' stamps and the experts the
// file holds, so a file with its final name (written atomically) is whole and
// current: a run killed or stopped by a full disk keeps the files it finished
// and the next run writes only the rest.
//
// With --copies N (N <= drives) each expert is on N different drives, and
// each chunk of a read comes from the copy whose drive would finish it first
// (SpanReader::submit_copies): a token's experts, routed at random, then load
// the drives evenly instead of the busiest drive's share setting the pace
// (N times the disk space).
//
// With --spine the spine's tensors (every tensor outside the routed
// experts' spans) go over the drives too, each whole at a 4096-aligned offset
// of one file per drive and shard,
//   DRIVE/sluice-stripe-<model folder name>/S<shard>.<key>.spans,
// placed in the shards' order to the drive with the least bytes per weight so
// far (a layer's tensors alternate drives): the streamed spine then reads at
// the drives' summed rate, and the resident one loads at it. One copy each
// (the spine's read order is fixed, so the bytes alone balance the drives);
// a spine file missing leaves its tensors on the shards, with a warning.
//
// DIR/stripe.json (written last, atomically) names them:
//   {"format": "sluice-stripe", "version": 1, "shards": [shard stamps,
//    checkpoint/shard_stamp.h], "span_bytes": N, "stride": N, "copies": N,
//    "drives": [{"path", "weight"}],
//    "files": [{"drive", "layer", "experts": [e, ...], "path", "bytes", "fnv1a64"}],
//    "spine_files": [{"drive", "shard", "tensors": [name, ...], "offsets": [...], "path", "bytes", "fnv1a64"}]}
// Opening a model applies it (apply_stripe): the experts it places are read
// from the drive files (appended to the checkpoint's file list); a stale
// manifest (a shard changed), or a drive file missing or of the wrong size,
// leaves those experts on the shards, with a warning naming the drive.
//
// --move frees the shards' copy of the experts once every drive file is
// checked bit-exact against them: their spans become holes in the shards
// (fallocate PUNCH_HOLE; the header and the spine stay where they are, and
// each shard's modification time is set back, so packs bound to it still
// hold). stripe.json says "moved": true before the first hole is made, and
// from then on the drives are the only copy: a missing drive file, a stale
// manifest over holes, --no-stripe and the shard fallback are errors, never
// zeros; a restripe reads the experts from the current stripe; verify hashes
// the shards through it. While a shard is being punched the manifest names
// it ("punching"); a run killed there is finished by the next `stripe`.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace sluice {

struct StripeDrive {
  std::string path;   // a folder on the drive
  double weight = 1;  // share of the experts, relative to the other drives
};

struct StripeFile {
  int drive = 0, layer = 0;  // layer -1: a spine file
  std::vector<int> experts;  // in file order
  // A spine file: the tensors it holds (checkpoint names) and where each
  // starts in it (4096-aligned); its shard.
  std::vector<std::string> tensors;
  std::vector<uint64_t> offsets;
  int shard = -1;
  std::string path;
  uint64_t bytes = 0;  // the whole file, trailer included
  uint64_t hash = 0;   // FNV-1a of the span bytes (0 until written or read back)
};

struct Stripe {
  std::string dir;  // the model
  std::vector<StripeDrive> drives;
  uint64_t span_bytes = 0, stride = 0;
  int copies = 1;  // drives holding each expert
  std::vector<StripeFile> files;        // the experts'
  std::vector<StripeFile> spine_files;  // --spine: the spine's tensors
  bool moved = false;  // --move: the experts' spans are holes in the shards
  int punching = -1;   // the shard --move was punching when the manifest was written (-1: none)
};

// DIR/stripe.json.
std::string stripe_manifest_path(const std::string& dir);

// "PATH[:WEIGHT],PATH[:WEIGHT],..." (weight 0: not given); throws naming --drives.
std::vector<StripeDrive> parse_drives(const std::string& list);

// The drive (index into weights) of each of `experts` experts of a layer:
// shares in proportion to the weights, deterministic.
std::vector<int> place_experts(int experts, const std::vector<double>& weights);

// `sluice plan --disk-gbps 7,7,3.5`: the rate a layer's experts arrive at
// when placed as place_experts does (the busiest drive's share sets it).
struct StripedRate {
  double gbps = 0;
  size_t drives = 1;
  double first_gbps = 0, sum_gbps = 0;  // the first drive's rate (the shards' spine); all of them (a striped spine)
  std::string placement;  // experts per layer on each drive, "128/128/128"; empty for one drive
};
// Throws naming --disk-gbps for a rate that is not a positive number.
StripedRate striped_rate(const std::string& list, int experts);

// Where each expert of ck goes (weighted, deterministic; copy c of an expert
// on the c-th drive after its first), with `spine` each spine tensor too, and
// the files' names. Throws naming --copies unless 1 <= copies <= drives.
Stripe plan_stripe(const Checkpoint& ck, const std::vector<StripeDrive>& drives, int copies = 1, bool spine = false);

struct StripeResult {
  bool up_to_date = false;  // the manifest and every file were already there
  int written = 0, kept = 0;
  uint64_t bytes_written = 0;
  uint64_t bytes_freed = 0;  // --move: expert bytes punched out of the shards by this run
  std::vector<uint64_t> drive_bytes;  // span bytes placed on each drive (spine tensors included)
};
// Where write_stripe reads the shards' bytes: (file of ck, offset, dst, n).
using ShardReader = std::function<void(int file, uint64_t offset, uint8_t* dst, uint64_t n)>;
struct StripeSource {
  std::function<ShardReader()> make_reader;  // one reader per worker (default: the shards on disk)
  int jobs = 1;                               // files written at once
  // The shards never held the experts (setup --drives: sparse shards, the
  // experts straight from the hub): the stripe is moved from the start.
  bool shards_are_holes = false;
};

// Writes the files plan_stripe names that are not there yet, then the
// manifest; removes the drive files of an earlier stripe of DIR that the new
// one does not name. progress(done, total) counts span bytes. Over a moved
// stripe the experts are read from its drive files (the new stripe stays
// moved); move: then frees the shards' copy (see --move above; it finishes
// an interrupted one too).
StripeResult write_stripe(const Checkpoint& ck, const std::vector<StripeDrive>& drives, int copies = 1,
                          const std::function<void(uint64_t, uint64_t)>& progress = {}, bool spine = false,
                          bool move = false, const StripeSource* source = nullptr);

// DIR/stripe.json exists and says the experts were moved off the shards.
bool stripe_moved(const std::string& dir);

// Reads DIR/stripe.json; throws naming it when malformed.
Stripe read_stripe(const std::string& dir);

struct StripeUse {
  bool present = false;  // DIR/stripe.json exists
  int files_used = 0;    // drive files the experts now point at
  int spine_tensors = 0; // spine tensors now read from a drive (--spine)
  // For one reader queue per drive (io/span_reader.h's devices): the drives
  // the experts now read from, and each of ck's files' device (0: a shard,
  // d: drives[d-1]); both empty when no drive file is used.
  std::vector<std::string> drives;
  std::vector<double> drive_weights;  // their weights (rates), as the manifest has them
  std::vector<int> file_devices;
  // The striped experts' spans in the shards, [layer][expert] (length 0: not
  // striped): where a failing drive's experts are read from instead, unless
  // moved (then they are holes there, and a drive is the only copy).
  bool moved = false;
  std::vector<std::vector<FileSpan>> shard_spans;
  // With copies: each expert's other drive-file spans, [layer][expert]
  // (empty: one copy); ck.experts holds the first.
  std::vector<std::vector<std::vector<FileSpan>>> copy_spans;
  std::vector<std::string> warnings;
};
// Points ck's expert spans (and with --spine its spine tensors) at the drive
// files of DIR/stripe.json (when there is one): they are appended to
// ck.shard_paths / shard_sizes. Call after anything that checks the shard
// list (a spine pack's binding), before anything takes tensor locations.
// spine false (a spine pack is in use: it is read from its own file) leaves
// the tensors where they are, with a warning when the stripe has spine files.
StripeUse apply_stripe(Checkpoint& ck, bool spine = true);

// Every drive file: present, its size, its trailer, and its span bytes
// against the shards' (bit-exact; a moved stripe's expert files against
// their checksum, the shards holding none). Returns problems, each naming
// the file. repair: a stale manifest is made again and bad files are written
// again from the shards (not a moved stripe's expert files: their bytes are
// nowhere else); returns what remains wrong after that.
std::vector<std::string> verify_stripe(const Checkpoint& ck, bool repair = false);

// A moved stripe: where each shard's expert spans now live, for reading a
// shard as it was (verify's sha256): [shard] -> (offset in the shard, span
// in a drive file of ck, as apply_stripe left it), by offset.
std::vector<std::vector<std::pair<uint64_t, FileSpan>>> moved_expert_spans(const Checkpoint& ck, const StripeUse& u);

// Which drive of the stripe `path` (a file of ck.shard_paths) lives on: -1 for a shard.
int stripe_drive_of(const Stripe& s, const std::string& path);

}  // namespace sluice
