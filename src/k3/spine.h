// k3/spine.h — the spine: every weight a forward pass reads except routed experts.
//
// A forward pass uses the spine's matrices in one fixed order: layer 0's
// attention matrices, its FFN matrices, ..., the last layer's, then the head
// (only in passes that want logits). Each matrix is cut into pieces of whole
// rows, at most chunk_bytes each, and every piece is either resident (read
// once at start) or streamed: read again on every pass through one ring buffer
// by a loader thread (io/span_stream.h) that runs ahead of the computation
// as far as the ring allows. Which pieces stay is the memory plan's choice
// (k3/model.cpp): every spine byte is used by every token, so a resident spine
// byte saves one read per token, more than an expert-cache byte ever does.
// Small vectors (norms, taps, gates) and the MoE routers are always resident:
// the router of layer l+1 is what prefetch lookahead runs while layer l
// computes.
//
// Matrices are used through matmul(), on the spine's backend (kernels/
// backend.h; the CPU one of the kernel choice unless given): a resident matrix is one kernel call;
// a streamed one is multiplied piece by piece as each lands (output rows are
// independent, so the result is bitwise the same). A matrix the forward pass
// indexes directly (MLA's kv_b) is never cut and is reached through whole().
// The forward pass calls begin_pass() first and must use the matrices in bind
// order (k3/weights.cpp); the stream throws if a piece is asked for out of
// order. Resident and streamed pieces give the same bytes: logits never depend
// on the plan.
//
// With a lossless pack (pack/pack.h) the matrices it holds are cut on its
// block boundaries and read from the pack instead: the ring holds compressed
// blocks, and take() decodes a streamed piece into one decode buffer on the
// kernel pool (checking each block's crc32 the first time it is read);
// resident pieces are decoded once at start. Decoding is exact, so logits are
// the same bits as with the bf16 shards.
//
// With an int8 pack (pack/int8.h) its matrices are cut the same way, but
// nothing is decoded: resident and streamed pieces hold the int8 rows as
// they are in the pack, and matmul() runs the int8 kernel on them (checking
// each block's crc32 on its first read). Lossy: logits differ from bf16 by
// the drift in docs/packs.md. Matrices an int8 pack leaves out (routers,
// MLA's kv_b) are read from the shards as bf16.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "io/span_stream.h"
#include "k3/weights.h"
#include "kernels/backend.h"
#include "model/dense_reads.h"
#include "pack/pack.h"

namespace sluice {

class Spine final : public DenseReads {
 public:
  // Binds every layer (vectors read, matrices located; nothing big is read yet)
  // and cuts every matrix into pieces of at most chunk_bytes. Arithmetic runs
  // on `backend` (nullptr: cpu_backend()).
  Spine(const Checkpoint& ck, uint64_t chunk_bytes, std::shared_ptr<const Pack> pack = nullptr,
        const Backend* backend = nullptr);
  ~Spine();
  Spine(const Spine&) = delete;
  Spine& operator=(const Spine&) = delete;

  // The pieces, in pass order (the head's last).
  int piece_count() const { return int(pieces_.size()); }
  uint64_t piece_bytes(int i) const;  // RAM it takes (aligned superset)
  uint64_t piece_read_bytes(int i) const;  // bytes a read of it takes from disk (packed, when from a pack)
  bool piece_is_head(int i) const { return pieces_[size_t(i)].head; }
  int piece_unit(int i) const { return pieces_[size_t(i)].unit; }  // 2l, 2l+1: layer l's attention / FFN; 2L: the head
  int piece_matrix(int i) const { return pieces_[size_t(i)].matrix; }  // a matrix's pieces are consecutive
  // Held as int8 rows (an int8 pack's), or decoded from lossless blocks when read.
  bool piece_is_int8(int i) const { return pieces_[size_t(i)].int8; }
  bool piece_is_decoded(int i) const { return pieces_[size_t(i)].packed && !pieces_[size_t(i)].int8; }
  // Every matrix in pass order, where its bf16 bytes lie (what a pack would hold).
  std::vector<PackSource> matrix_sources() const;
  // RAM that is resident whatever the plan: vectors, routers (and the decode buffer of a pack).
  uint64_t fixed_bytes() const { return fixed_bytes_; }
  // The smallest ring that streams any piece while the one before is in use.
  uint64_t min_ring_bytes() const;

  // Reads the routers and the pieces marked resident; streams the others
  // through a ring of ring_bytes (none when every piece is resident).
  // progress(done, total), when given, is called as the resident bytes land.
  void start(const std::vector<bool>& resident, uint64_t ring_bytes, const SpanReaderOptions& io,
             const std::function<void(uint64_t done, uint64_t total)>& progress = {});

  // Announces the resident bytes to the backend as host memory it may read
  // weights from (kernels/backend.h register_host: the CUDA entry pins them,
  // for --gpu-spill split); withdrawn when the spine goes. After start().
  void pin_resident();

  void begin_pass(bool with_head);
  // A pass that only reads: takes every streamed piece in order, computes
  // nothing (the bench's floor for a step). at_unit(u) runs as the pass
  // reaches unit u: 2l and 2l+1 for layer l's attention and FFN parts, 2L for
  // the head.
  void read_pass(bool with_head, const std::function<void(int unit)>& at_unit = {}) override;

  const LayerWeights& attention(int l) const { return layers_w_[size_t(2 * l)]; }
  const LayerWeights& ffn(int l) const { return layers_w_[size_t(2 * l + 1)]; }
  const Bf16Matrix& head() const { return head_; }
  // Layer l's router, resident once started (MoE layers only).
  const Bf16Matrix& router(int l) const { return ffn(l).moe.router; }
  const std::vector<float>& router_bias(int l) const { return ffn(l).moe.bias; }

  // The backend every sublayer computes on, and the owner of the spine's
  // stable weights for it: resident matrices and pieces, the bound FP32
  // vectors, the routers (released when the spine closes). Streamed pieces
  // are passed as transient (owner 0).
  const Backend& backend() const { return *be_; }
  WeightOwner owner() const { return owner_; }
  F32Ref vec(const std::vector<float>& v) const { return {v.data(), owner_}; }
  // A resident matrix (m.w set: a router, or a matrix resident whole) for the backend.
  Bf16Ref resident(const Bf16Matrix& m) const { return {m.w, m.rows, m.cols, owner_}; }

  // y[T][m.rows] = x[T][m.cols] · mᵀ (the backend's matmul_bf16 contract).
  void matmul(const Bf16Matrix& m, const float* x, int T, float* y);
  // While `log` is set, the id of every spine matrix used (multiplied or
  // taken whole) is appended to it: a pass must use them in id order.
  void record_use(std::vector<int>* log) { use_log_ = log; }
  // Called before every matrix is multiplied or taken, and before each
  // streamed piece: lets expert reads progress during spine compute
  // (ExpertSource::pump; without it the queue drains between fetches).
  void set_between_matrices(std::function<void()> f) { between_ = std::move(f); }
  // The bytes of a matrix bound as indexed (one piece), valid until the next
  // piece is taken (owner 0 when streamed).
  Bf16Ref whole(const Bf16Matrix& m);

  bool all_resident() const override { return !stream_; }
  const Pack* pack() const override { return pack_.get(); }
  // Spine matrix bytes read from files so far: at start, and streamed.
  uint64_t bytes_read() const override;
  // What one pass streams (0 when all resident).
  uint64_t streamed_bytes_per_pass(bool with_head) const override;
  // The streaming ring's counters (zeros when all resident).
  SpanStreamStats stream_stats() const override;

 private:
  struct Matrix {
    Bf16Matrix* view = nullptr;
    FileSpan span;  // the whole tensor
    std::vector<int> pieces;
    const uint8_t* q8 = nullptr;  // int8, when every piece is resident: the whole matrix
  };
  struct Piece {
    int matrix = 0;
    int64_t row0 = 0;
    int rows = 0;
    FileSpan span;
    int unit = 0;  // 2l, 2l+1: layer l's attention / FFN part; 2L: the head
    bool head = false;
    bool resident = false;
    int item = -1;                   // its index in the stream, when streamed
    const uint16_t* data = nullptr;  // when resident (bf16 or decoded)
    const uint8_t* q8 = nullptr;     // when resident and int8
    const PackedTensor* packed = nullptr;  // read from the pack: blocks [block0, block0 + blocks)
    int64_t block0 = 0, blocks = 0;
    bool int8 = false;             // from an int8 pack: q8 rows, never decoded
    mutable bool checked = false;  // its blocks' checksums were checked
  };
  // A read of resident bytes at start(): a matrix read whole, or one piece.
  struct ResidentRead {
    FileSpan span;
    std::vector<int> pieces;  // pointed at the landed bytes
    int whole = -1;           // the matrix read whole, or -1
    int whole_int8 = -1;      // the int8 matrix read whole, or -1
  };
  // start()'s steps, in order.
  void plan_resident_reads(const std::vector<bool>& resident, std::vector<ResidentRead>* reads,
                           std::vector<ResidentRead>* packed) const;
  uint64_t decoded_bytes(const ResidentRead& r) const;
  void read_packed(const std::vector<ResidentRead>& packed, uint64_t at, const SpanReaderOptions& io);
  void read_resident(const std::vector<ResidentRead>& reads, uint64_t total, const SpanReaderOptions& io,
                     const std::function<void(uint64_t done, uint64_t total)>& progress);
  void start_stream(uint64_t ring_bytes, const SpanReaderOptions& io);
  std::function<void()> between_;
  void add_matrix(const MatrixRef& r, uint64_t chunk_bytes, int unit);
  const uint16_t* take(const Piece& p);
  const uint8_t* take_int8(const Piece& p);

  const Checkpoint& ck_;
  std::shared_ptr<const Pack> pack_;
  const Backend* be_;
  WeightOwner owner_;
  std::vector<std::string> paths_;  // the shards, then the pack
  AlignedBuffer decoded_;           // a streamed packed piece, decoded
  int layers_ = 0;
  std::vector<LayerWeights> layers_w_;  // 2 per layer; never resized (the views point into it)
  Bf16Matrix head_;
  std::vector<Matrix> matrices_;        // in pass order; Bf16Matrix::id indexes it
  std::vector<Piece> pieces_;           // in pass order
  std::vector<MatrixRef> pinned_;       // routers
  uint64_t fixed_bytes_ = 0;
  AlignedBuffer pinned_bytes_, resident_bytes_;
  bool resident_announced_ = false;  // pin_resident(): register_host called on resident_bytes_
  uint64_t resident_read_ = 0;
  std::unique_ptr<SpanStream> stream_;
  std::vector<float> scatter_;  // a piece's output rows for T > 1
  std::vector<int>* use_log_ = nullptr;
};

}  // namespace sluice
