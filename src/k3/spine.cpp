#include "k3/spine.h"

#include <algorithm>

#include "base/error.h"

namespace sluice {

namespace {

uint64_t ram_bytes(const std::vector<MatrixRef>& refs) {
  uint64_t n = 0;
  for (const MatrixRef& r : refs) n += SpanReader::direct_capacity(r.span.length);
  return n;
}

uint64_t read_bytes(const std::vector<MatrixRef>& refs) {
  uint64_t n = 0;
  for (const MatrixRef& r : refs) n += SpanReader::direct_bytes(r.span.offset, r.span.length);
  return n;
}

StreamItem stream_item(const std::vector<MatrixRef>& refs) {
  StreamItem it;
  for (const MatrixRef& r : refs) it.spans.push_back(r.span);
  return it;
}

}  // namespace

Spine::Spine(const Checkpoint& ck, uint64_t head_chunk_bytes) : ck_(ck), layers_(ck.config.num_hidden_layers) {
  const ModelConfig& c = ck.config;
  layers_w_.resize(size_t(2 * layers_));
  units_.resize(size_t(2 * layers_));
  for (int u = 0; u < 2 * layers_; u++) {
    UnitTensors t;
    bind_layer_part(ck, u / 2, LayerPart(u % 2), layers_w_[size_t(u)], &t);
    units_[size_t(u)].matrices = std::move(t.matrices);
    pinned_.insert(pinned_.end(), t.pinned.begin(), t.pinned.end());
    fixed_bytes_ += t.vector_bytes;
  }
  fixed_bytes_ += ram_bytes(pinned_);

  // The head in chunks of whole rows.
  const TensorInfo& head = ck.tensor("lm_head.weight", DType::BF16, {c.vocab_size, c.hidden_size});
  const uint64_t row_bytes = uint64_t(c.hidden_size) * 2;
  const int64_t rows = std::max<int64_t>(1, int64_t(head_chunk_bytes / row_bytes));
  const int64_t chunks = (c.vocab_size + rows - 1) / rows;
  head_w_.resize(size_t(chunks));
  for (int64_t k = 0; k < chunks; k++) {
    HeadChunk& h = head_w_[size_t(k)];
    h.row0 = k * rows;
    h.w.rows = int(std::min<int64_t>(rows, c.vocab_size - h.row0));
    h.w.cols = c.hidden_size;
    Unit u;
    u.matrices.push_back({&h.w, {head.shard, head.offset + uint64_t(h.row0) * row_bytes, uint64_t(h.w.rows) * row_bytes}});
    units_.push_back(std::move(u));
  }
}

Spine::~Spine() = default;

uint64_t Spine::unit_bytes(int u) const { return ram_bytes(units_[size_t(u)].matrices); }

uint64_t Spine::min_ring_bytes() const {
  std::vector<StreamItem> items;
  for (const Unit& u : units_) items.push_back(stream_item(u.matrices));
  return SpanStream::min_ring_bytes(items);
}

void Spine::start(const std::vector<bool>& resident, uint64_t ring_bytes, const SpanReaderOptions& io) {
  if (resident.size() != units_.size()) fail("spine", "residency plan does not cover every unit");
  pinned_bytes_ = read_matrices(ck_, pinned_);
  std::vector<MatrixRef> kept;
  std::vector<StreamItem> items;
  size_t required = 0;
  for (size_t u = 0; u < units_.size(); u++) {
    Unit& unit = units_[u];
    unit.resident = resident[u];
    if (unit.resident) {
      kept.insert(kept.end(), unit.matrices.begin(), unit.matrices.end());
      continue;
    }
    unit.stream_item = int(items.size());
    items.push_back(stream_item(unit.matrices));
    if (int(u) < 2 * layers_) required++;  // layer units come first: every pass reads them
  }
  resident_bytes_ = read_matrices(ck_, kept);
  resident_read_ = read_bytes(pinned_) + read_bytes(kept);
  if (!items.empty()) stream_ = std::make_unique<SpanStream>(ck_.shard_paths, std::move(items), required, ring_bytes, io);
}

void Spine::begin_pass(bool with_head) {
  with_head_ = with_head;
  if (stream_) stream_->begin_pass(with_head);
}

void Spine::take(int u) {
  Unit& unit = units_[size_t(u)];
  if (unit.resident) return;
  const uint8_t* const* data = stream_->acquire(size_t(unit.stream_item));
  for (size_t j = 0; j < unit.matrices.size(); j++)
    unit.matrices[j].view->w = reinterpret_cast<const uint16_t*>(data[j]);
}

const HeadChunk& Spine::head(int k) {
  take(2 * layers_ + k);
  return head_w_[size_t(k)];
}

uint64_t Spine::bytes_read() const { return resident_read_ + (stream_ ? stream_->stats().bytes_read : 0); }

uint64_t Spine::streamed_bytes_per_pass(bool with_head) const {
  uint64_t n = 0;
  for (size_t u = 0; u < units_.size(); u++)
    if (!units_[u].resident && (with_head || int(u) < 2 * layers_)) n += read_bytes(units_[u].matrices);
  return n;
}

SpanStreamStats Spine::stream_stats() const { return stream_ ? stream_->stats() : SpanStreamStats{}; }

}  // namespace sluice
