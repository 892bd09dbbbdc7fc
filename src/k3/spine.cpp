#include "k3/spine.h"

#include <algorithm>

#include "base/error.h"
#include "pack/int8.h"

namespace sluice {

Spine::Spine(const Checkpoint& ck, uint64_t chunk_bytes, std::shared_ptr<const Pack> pack, const Backend* backend)
    : ck_(ck),
      pack_(std::move(pack)),
      be_(backend ? backend : &cpu_backend()),
      owner_(next_weight_owner()),
      paths_(ck.shard_paths),
      layers_(ck.config.num_hidden_layers) {
  if (pack_) paths_.push_back(pack_->path);
  const ModelConfig& c = ck.config;
  layers_w_.resize(size_t(2 * layers_));
  for (int u = 0; u < 2 * layers_; u++) {
    UnitTensors t;
    bind_layer_part(ck, u / 2, LayerPart(u % 2), layers_w_[size_t(u)], &t);
    for (const MatrixRef& r : t.matrices) add_matrix(r, chunk_bytes, u);
    pinned_.insert(pinned_.end(), t.pinned.begin(), t.pinned.end());
    fixed_bytes_ += t.vector_bytes;
  }
  for (const MatrixRef& r : pinned_) fixed_bytes_ += SpanReader::direct_capacity(r.span.length);
  const FileSpan head = layout_only(ck) ? FileSpan{2 * layers_, 0, uint64_t(c.vocab_size) * uint64_t(c.hidden_size) * 2}
                                       : ck.tensor("lm_head.weight", DType::BF16, {c.vocab_size, c.hidden_size}).span();
  head_.rows = c.vocab_size;
  head_.cols = c.hidden_size;
  add_matrix({&head_, head, false}, chunk_bytes, 2 * layers_);
  uint64_t decode = 0;  // the largest packed piece, decoded
  for (const Piece& p : pieces_)
    if (p.packed && !p.int8) decode = std::max(decode, uint64_t(p.rows) * uint64_t(matrices_[size_t(p.matrix)].view->cols) * 2);
  if (decode) decoded_ = AlignedBuffer(decode);
  fixed_bytes_ += decode;
}

Spine::~Spine() {
  if (resident_announced_) be_->unregister_host(resident_bytes_.data(), resident_bytes_.size());
  be_->release(owner_);
}

void Spine::pin_resident() {
  if (resident_announced_ || !be_->register_host || !be_->unregister_host || resident_bytes_.size() <= 1) return;
  be_->register_host(resident_bytes_.data(), resident_bytes_.size());
  resident_announced_ = true;
}

void Spine::add_matrix(const MatrixRef& r, uint64_t chunk_bytes, int unit) {
  Bf16Matrix& m = *r.view;
  m.id = int(matrices_.size());
  matrices_.push_back({r.view, r.span, {}, nullptr});
  const uint64_t row_bytes = uint64_t(m.cols) * 2;
  const PackedTensor* packed = pack_ ? pack_->find(r.span.file, r.span.offset) : nullptr;
  const bool int8 = packed && pack_->format == SpineFormat::int8;
  if (int8 && r.whole_only) packed = nullptr;  // indexed, not multiplied: bf16 from the shards
  if (const PackedTensor* t = packed) {
    // Packed: pieces of whole blocks, read from the pack (the last file);
    // at most chunk_bytes of what they hold in RAM (decoded bf16, or int8).
    const int64_t block_bytes = int64_t(int8 ? int8_row_bytes(m.cols) : row_bytes) * t->rows_per_block;
    const int64_t per_piece = r.whole_only ? t->blocks() : std::max<int64_t>(1, int64_t(chunk_bytes) / block_bytes);
    for (int64_t b0 = 0; b0 < t->blocks(); b0 += per_piece) {
      Piece p;
      p.matrix = m.id;
      p.packed = t;
      p.int8 = int8;
      p.block0 = b0;
      p.blocks = std::min(per_piece, t->blocks() - b0);
      p.row0 = b0 * t->rows_per_block;
      p.rows = int(std::min<int64_t>(m.rows, (b0 + p.blocks) * t->rows_per_block) - p.row0);
      const uint64_t from = t->index[size_t(b0)], to = t->index[size_t(b0 + p.blocks)];
      p.span = {int(paths_.size() - 1), t->data_at + from, to - from};
      p.unit = unit;
      p.head = unit == 2 * layers_;
      matrices_.back().pieces.push_back(int(pieces_.size()));
      pieces_.push_back(p);
    }
    return;
  }
  const int64_t per_piece = r.whole_only ? m.rows : std::max<int64_t>(1, int64_t(chunk_bytes / row_bytes));
  for (int64_t r0 = 0; r0 < m.rows; r0 += per_piece) {
    Piece p;
    p.matrix = m.id;
    p.row0 = r0;
    p.rows = int(std::min<int64_t>(per_piece, m.rows - r0));
    p.span = {r.span.file, r.span.offset + uint64_t(r0) * row_bytes, uint64_t(p.rows) * row_bytes};
    p.unit = unit;
    p.head = unit == 2 * layers_;
    matrices_.back().pieces.push_back(int(pieces_.size()));
    pieces_.push_back(p);
  }
}

uint64_t Spine::piece_bytes(int i) const {
  const Piece& p = pieces_[size_t(i)];
  if (p.packed && !p.int8) return SpanReader::direct_capacity(uint64_t(p.rows) * uint64_t(matrices_[size_t(p.matrix)].view->cols) * 2);
  return SpanReader::direct_capacity(p.span.length);
}

uint64_t Spine::piece_read_bytes(int i) const {
  const Piece& p = pieces_[size_t(i)];
  return SpanReader::direct_bytes(p.span.offset, p.span.length);
}

std::vector<PackSource> Spine::matrix_sources() const {
  std::vector<PackSource> out;
  for (const Matrix& m : matrices_) out.push_back({m.span, m.view->rows, m.view->cols});
  return out;
}

uint64_t Spine::min_ring_bytes() const {
  std::vector<StreamItem> items;
  for (const Piece& p : pieces_) items.push_back(StreamItem{{p.span}});
  return SpanStream::min_ring_bytes(items);
}

void Spine::start(const std::vector<bool>& resident, uint64_t ring_bytes, const SpanReaderOptions& io,
                  const std::function<void(uint64_t done, uint64_t total)>& progress) {
  if (layout_only(ck_)) fail(ck_.dir, "a checkpoint known by its config alone has no weights to read");
  if (resident.size() != pieces_.size()) fail("spine", "residency plan does not cover every piece");
  pinned_bytes_ = read_matrices(ck_, pinned_);
  resident_read_ = 0;
  for (const MatrixRef& r : pinned_) resident_read_ += SpanReader::direct_bytes(r.span.offset, r.span.length);
  std::vector<ResidentRead> reads;
  std::vector<ResidentRead> packed;  // resident packed pieces: read compressed, decoded into place
  plan_resident_reads(resident, &reads, &packed);
  uint64_t total = 0;
  for (const ResidentRead& r : reads) total += SpanReader::direct_capacity(r.span.length);
  uint64_t packed_total = 0;
  for (const ResidentRead& r : packed) packed_total += decoded_bytes(r);
  resident_bytes_ = AlignedBuffer(total + packed_total ? total + packed_total : 1);
  if (!packed.empty()) read_packed(packed, total, io);
  if (!reads.empty()) read_resident(reads, total, io, progress);
  start_stream(ring_bytes, io);
}

// Resident: a matrix all of whose pieces stay is read whole (one view, one
// kernel call); otherwise each resident piece is read on its own.
void Spine::plan_resident_reads(const std::vector<bool>& resident, std::vector<ResidentRead>* reads,
                                std::vector<ResidentRead>* packed) const {
  for (size_t i = 0; i < matrices_.size(); i++) {
    const Matrix& mx = matrices_[i];
    const Piece* first = mx.pieces.empty() ? nullptr : &pieces_[size_t(mx.pieces[0])];
    if (first && first->int8) {
      // int8: read as stored (no decoding), like bf16; a matrix all of whose
      // pieces stay is one read of its blocks.
      bool all = true;
      for (int p : mx.pieces) all = all && resident[size_t(p)];
      const PackedTensor& t = *first->packed;
      if (all) reads->push_back({{first->span.file, t.data_at, t.index.back()}, mx.pieces, -1, int(i)});
      else
        for (int p : mx.pieces)
          if (resident[size_t(p)]) reads->push_back({pieces_[size_t(p)].span, {p}, -1, -1});
      continue;
    }
    if (first && first->packed) {
      bool all = true;
      for (int p : mx.pieces) all = all && resident[size_t(p)];
      if (all) packed->push_back({mx.span, mx.pieces, int(i), -1});
      else
        for (int p : mx.pieces)
          if (resident[size_t(p)]) packed->push_back({pieces_[size_t(p)].span, {p}, -1, -1});
      continue;
    }
    bool all = true;
    for (int p : mx.pieces) all = all && resident[size_t(p)];
    if (all) {
      reads->push_back({mx.span, mx.pieces, int(i), -1});
      continue;
    }
    for (int p : mx.pieces)
      if (resident[size_t(p)]) reads->push_back({pieces_[size_t(p)].span, {p}, -1, -1});
  }
}

// The bytes a resident packed read takes once decoded.
uint64_t Spine::decoded_bytes(const ResidentRead& r) const {
  const Bf16Matrix& m = *matrices_[size_t(pieces_[size_t(r.pieces[0])].matrix)].view;
  return r.whole >= 0 ? SpanReader::direct_capacity(uint64_t(m.rows) * uint64_t(m.cols) * 2) : piece_bytes(r.pieces[0]);
}

// Reads the resident packed pieces and decodes them into resident_bytes_, from `at` on.
void Spine::read_packed(const std::vector<ResidentRead>& packed, uint64_t at, const SpanReaderOptions& io) {
  SpanReader reader(paths_, io);
  for (const ResidentRead& r : packed) {
    // A matrix all of whose pieces stay is decoded into one view (one kernel call).
    uint16_t* out = reinterpret_cast<uint16_t*>(resident_bytes_.data() + at);
    if (r.whole >= 0) matrices_[size_t(r.whole)].view->w = out;
    for (int i : r.pieces) {
      Piece& pc = pieces_[size_t(i)];
      const Completed c = reader.wait(reader.submit(pc.span.file, pc.span.offset, pc.span.length, {}));
      pc.data = r.whole >= 0 ? out + pc.row0 * matrices_[size_t(pc.matrix)].view->cols : out;
      decode_blocks(*pack_, *pc.packed, pc.block0, pc.blocks, c.data, const_cast<uint16_t*>(pc.data), true);
      pc.resident = pc.checked = true;
      resident_read_ += SpanReader::direct_bytes(pc.span.offset, pc.span.length);
    }
    at += decoded_bytes(r);
  }
}

// Reads the resident bf16 and int8 bytes into resident_bytes_ (`total` of
// them, from its start) and points their views and pieces at them.
void Spine::read_resident(const std::vector<ResidentRead>& reads, uint64_t total, const SpanReaderOptions& io,
                          const std::function<void(uint64_t done, uint64_t total)>& progress) {
  SpanReader reader(paths_, io);
  std::vector<uint64_t> tickets;
  uint64_t at = 0;
  for (const ResidentRead& r : reads) {
    const uint64_t cap = SpanReader::direct_capacity(r.span.length);
    tickets.push_back(reader.submit(r.span.file, r.span.offset, r.span.length,
                                    std::span<uint8_t>(resident_bytes_.data() + at, cap)));
    at += cap;
    resident_read_ += SpanReader::direct_bytes(r.span.offset, r.span.length);
  }
  uint64_t landed = 0;
  if (progress) progress(0, total);
  for (size_t i = 0; i < reads.size(); i++) {
    const uint8_t* bytes = reader.wait(tickets[i]).data;
    landed += SpanReader::direct_capacity(reads[i].span.length);
    if (progress) progress(landed, total);
    const ResidentRead& r = reads[i];
    if (r.whole >= 0) matrices_[size_t(r.whole)].view->w = reinterpret_cast<const uint16_t*>(bytes);
    if (r.whole_int8 >= 0) matrices_[size_t(r.whole_int8)].q8 = bytes;
    for (int p : r.pieces) {
      Piece& pc = pieces_[size_t(p)];
      pc.resident = true;
      const uint8_t* at = bytes + (pc.span.offset - r.span.offset);  // pieces are contiguous runs of the read
      if (!pc.int8) {
        pc.data = reinterpret_cast<const uint16_t*>(at);
        continue;
      }
      pc.q8 = at;
      check_int8_blocks(*pack_, *pc.packed, pc.block0, pc.blocks, at);
      pc.checked = true;
    }
  }
}

void Spine::start_stream(uint64_t ring_bytes, const SpanReaderOptions& io) {
  // Streamed: the rest, in pass order; the head's pieces are the optional tail.
  std::vector<StreamItem> items;
  size_t required = 0;
  for (Piece& p : pieces_) {
    if (p.resident) continue;
    p.item = int(items.size());
    items.push_back(StreamItem{{p.span}});
    if (!p.head) required++;
  }
  if (!items.empty()) stream_ = std::make_unique<SpanStream>(paths_, std::move(items), required, ring_bytes, io);
}

void Spine::begin_pass(bool with_head) {
  if (stream_) stream_->begin_pass(with_head);
}

void Spine::read_pass(bool with_head, const std::function<void(int unit)>& at_unit) {
  begin_pass(with_head);
  int unit = -1;
  for (const Piece& p : pieces_) {
    if (p.head && !with_head) break;
    for (; unit < p.unit; unit++)
      if (at_unit) at_unit(unit + 1);
    if (p.resident) continue;
    if (p.int8)
      take_int8(p);
    else
      take(p);
  }
  if (stream_) stream_->release();
}

const uint16_t* Spine::take(const Piece& p) {
  if (p.resident) return p.data;
  const uint8_t* bytes = stream_->acquire(size_t(p.item))[0];
  if (!p.packed) return reinterpret_cast<const uint16_t*>(bytes);
  uint16_t* out = reinterpret_cast<uint16_t*>(decoded_.data());
  decode_blocks(*pack_, *p.packed, p.block0, p.blocks, bytes, out, !p.checked);
  p.checked = true;
  return out;
}

const uint8_t* Spine::take_int8(const Piece& p) {
  if (p.resident) return p.q8;
  const uint8_t* bytes = stream_->acquire(size_t(p.item))[0];
  if (!p.checked) check_int8_blocks(*pack_, *p.packed, p.block0, p.blocks, bytes);
  p.checked = true;
  return bytes;
}

void Spine::matmul(const Bf16Matrix& m, const float* x, int T, float* y) {
  if (between_) between_();
  if (use_log_ && m.id >= 0) use_log_->push_back(m.id);
  if (m.w) {
    be_->matmul_bf16(resident(m), x, T, y);
    return;
  }
  const Matrix& mx = matrices_.at(size_t(m.id));
  if (mx.q8) {
    be_->matmul_int8(Int8Ref{mx.q8, m.rows, m.cols, owner_}, x, T, y);
    return;
  }
  // One piece's rows [row0, row0 + rows) of the T outputs, into out ([T][rows]).
  auto piece = [&](const Piece& p, float* out) {
    if (p.int8)
      be_->matmul_int8(Int8Ref{take_int8(p), p.rows, m.cols, p.resident ? owner_ : 0}, x, T, out);
    else
      be_->matmul_bf16(Bf16Ref{take(p), p.rows, m.cols, p.resident ? owner_ : 0}, x, T, out);
  };
  for (int i : mx.pieces) {
    const Piece& p = pieces_[size_t(i)];
    if (between_ && !p.resident) between_();  // a streamed piece may keep us waiting
    if (T == 1) {
      piece(p, y + p.row0);
      continue;
    }
    scatter_.resize(size_t(T) * size_t(p.rows));
    piece(p, scatter_.data());
    for (int t = 0; t < T; t++)
      std::copy_n(scatter_.data() + size_t(t) * p.rows, p.rows, y + size_t(t) * m.rows + p.row0);
  }
}

Bf16Ref Spine::whole(const Bf16Matrix& m) {
  if (between_) between_();
  if (use_log_ && m.id >= 0) use_log_->push_back(m.id);
  if (m.w) return resident(m);
  const Matrix& mx = matrices_.at(size_t(m.id));
  if (mx.pieces.size() != 1 || pieces_[size_t(mx.pieces[0])].int8)
    fail("spine", "matrix indexed whole was cut into pieces or is int8");
  const Piece& p = pieces_[size_t(mx.pieces[0])];
  return {take(p), m.rows, m.cols, p.resident ? owner_ : 0};
}

uint64_t Spine::bytes_read() const { return resident_read_ + (stream_ ? stream_->stats().bytes_read : 0); }

uint64_t Spine::streamed_bytes_per_pass(bool with_head) const {
  uint64_t n = 0;
  for (const Piece& p : pieces_)
    if (!p.resident && (with_head || !p.head)) n += SpanReader::direct_bytes(p.span.offset, p.span.length);
  return n;
}

SpanStreamStats Spine::stream_stats() const { return stream_ ? stream_->stats() : SpanStreamStats{}; }

}  // namespace sluice
