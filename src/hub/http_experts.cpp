#include "hub/http_experts.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "hub/hf_env.h"
#include "base/error.h"
#include "base/file_io.h"
#include "hub/http_client.h"
#include "hub/span_cache.h"

namespace sluice {

namespace {

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

class HttpExperts : public ExpertSource {
 public:
  HttpExperts(const Checkpoint& ck, const StreamConfig& cfg)
      : ck_(ck), cfg_(cfg), cache_(cfg.cache_dir, cfg.manifest.max_cache_bytes) {
    for (size_t s = 0; s < ck.shard_paths.size(); s++) {
      const std::string name = base_name(ck.shard_paths[s]);
      const StreamShard* found = find_stream_shard(cfg.manifest, name);
      if (!found) fail(ck.dir + "/" + kStreamManifestName, "shard '" + name + "' has no URL");
      if (found->size != ck.shard_sizes[s])
        fail(ck.shard_paths[s], "is " + std::to_string(ck.shard_sizes[s]) + " bytes, the stream manifest says " +
                                    std::to_string(found->size));
      shards_.push_back(*found);
      direct_urls_.emplace_back();
      local_fds_.push_back(-1);
      if (found->local) {
        int fd = ::open(ck.shard_paths[s].c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) fail(ck.shard_paths[s], std::string("cannot open: ") + std::strerror(errno));
        local_fds_.back() = fd;
      }
    }
    HttpOptions http;
    http.bearer_token = cfg.bearer_token;
    http.stall_timeout_s = cfg.manifest.stall_timeout_s;
    http.retries = cfg.manifest.retries;
    http.backoff_ms = cfg.manifest.backoff_ms;
    http.on_retry = cfg.on_retry;
    for (int i = 0; i < cfg.manifest.connections; i++) workers_.emplace_back([this, http] { work(http); });
  }

  ~HttpExperts() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : workers_) t.join();
    for (int fd : local_fds_)
      if (fd >= 0) ::close(fd);
  }

  void fetch(int layer, std::span<const int> experts,
             const std::function<void(size_t i, const uint8_t* span)>& use) override {
    if (layer < 0 || size_t(layer) >= ck_.experts.size() || ck_.experts[size_t(layer)].empty())
      fail(ck_.dir, "layer " + std::to_string(layer) + " has no routed experts");
    for (int e : experts)
      if (e < 0 || size_t(e) >= ck_.experts[size_t(layer)].size())
        fail(ck_.dir, "layer " + std::to_string(layer) + " has no expert " + std::to_string(e));
    auto call = std::make_shared<Call>();
    call->results.resize(experts.size());
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < experts.size(); i++) queue_.push_back(Job{call, i, layer, experts[i]});
    }
    cv_.notify_all();
    spans_requested_ += experts.size();
    std::string first_error;
    for (size_t handled = 0; handled < experts.size(); handled++) {
      size_t i;
      {
        std::unique_lock<std::mutex> lock(call->mu);
        call->cv.wait(lock, [&] { return !call->done.empty(); });
        i = call->done.front();
        call->done.pop_front();
      }
      Result& r = call->results[i];
      if (r.error.empty() && first_error.empty()) use(i, r.bytes.get());
      else if (first_error.empty()) first_error = r.error;
      r.bytes.reset();
    }
    if (!first_error.empty()) throw Error(first_error);
  }

  StreamStats stream_stats() const {
    StreamStats s;
    s.spans_requested = spans_requested_;
    s.spans_fetched = spans_fetched_;
    s.local_reads = local_reads_;
    s.network_bytes = network_bytes_;
    s.requests = requests_;
    s.retries = retries_;
    SpanCacheStats c = cache_.stats();
    s.cache_hits = c.hits;
    s.cache_corrupt = c.corrupt;
    s.cache_evictions = c.evictions;
    s.cache_store_errors = c.store_errors;
    s.cache_bytes = c.bytes;
    s.cache_entries = c.entries;
    return s;
  }

  ExpertStats stats() const override {
    StreamStats st = stream_stats();
    ExpertStats e;
    e.fetched = st.spans_requested;
    e.cache_hits = st.cache_hits;
    e.network_bytes = st.network_bytes;
    return e;
  }

 private:
  struct Result {
    std::unique_ptr<uint8_t[]> bytes;
    std::string error;
  };
  // One fetch() call: its results, and the indices finished so far.
  struct Call {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<size_t> done;
    std::vector<Result> results;
  };
  struct Job {
    std::shared_ptr<Call> call;
    size_t i;
    int layer, expert;
  };

  void work(const HttpOptions& options) {
    HttpClient http(options);
    HttpOptions no_token = options;
    no_token.bearer_token.clear();
    HttpClient direct(no_token);
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      Result& r = job.call->results[job.i];
      try {
        r.bytes = load(http, direct, job.layer, job.expert);
      } catch (const std::exception& e) {
        r.error = std::string("expert ") + std::to_string(job.expert) + " of layer " + std::to_string(job.layer) +
                  ": " + e.what();
        r.bytes.reset();
      }
      {
        std::lock_guard<std::mutex> lock(job.call->mu);
        job.call->done.push_back(job.i);
      }
      job.call->cv.notify_one();
    }
  }

  std::unique_ptr<uint8_t[]> load(HttpClient& http, HttpClient& direct, int layer, int expert) {
    const FileSpan& span = ck_.experts[size_t(layer)][size_t(expert)];
    std::unique_ptr<uint8_t[]> buf(new uint8_t[span.length]);
    const size_t s = size_t(span.file);
    if (local_fds_[s] >= 0) {
      read_exact(local_fds_[s], buf.get(), span.length, span.offset, ck_.shard_paths[s]);
      local_reads_++;
      return buf;
    }
    if (cache_.read(layer, expert, span.length, buf.get())) return buf;
    auto into_buf = [&](uint64_t pos, const uint8_t* data, size_t n) {
      std::memcpy(buf.get() + (pos - span.offset), data, n);
    };
    bool done = false;
    if (std::string url = direct_url(s); !url.empty()) {
      const HttpCounters before = direct.counters();
      try {
        direct.get_range(url, span.offset, span.length, shards_[s].size, into_buf);
        done = true;
      } catch (const Error&) {
        forget_direct_url(s, url);  // expired or gone: back to the hub URL
      }
      count(before, direct.counters());
    }
    if (!done) {
      const HttpCounters before = http.counters();
      try {
        http.get_range(shards_[s].url, span.offset, span.length, shards_[s].size, into_buf);
      } catch (const HttpGaveUp& e) {
        count(before, http.counters());
        throw Error(std::string(e.what()) + hub_hint());
      } catch (...) {
        count(before, http.counters());
        throw;
      }
      count(before, http.counters());
      if (http.effective_url() != shards_[s].url) remember_direct_url(s, http.effective_url());
    }
    spans_fetched_++;
    cache_.store(layer, expert, buf.get(), span.length);
    return buf;
  }

  // Where a failed span request leads the user: the URLs came from setup.
  std::string hub_hint() const {
    return " (a stream install fetches experts from the hub on first use: check the network, and the hub "
           "`sluice setup --stream` was given (--hub, else $HF_ENDPOINT); the URLs are in " +
           ck_.dir + "/" + kStreamManifestName + ")";
  }

  std::string direct_url(size_t shard) {
    std::lock_guard<std::mutex> lock(mu_);
    return direct_urls_[shard];
  }
  void remember_direct_url(size_t shard, const std::string& url) {
    std::lock_guard<std::mutex> lock(mu_);
    direct_urls_[shard] = url;
  }
  void forget_direct_url(size_t shard, const std::string& url) {
    std::lock_guard<std::mutex> lock(mu_);
    if (direct_urls_[shard] == url) direct_urls_[shard].clear();
  }

  void count(const HttpCounters& before, const HttpCounters& after) {
    network_bytes_ += after.body_bytes - before.body_bytes;
    requests_ += after.requests - before.requests;
    retries_ += after.retries - before.retries;
  }

  const Checkpoint& ck_;
  StreamConfig cfg_;
  SpanCache cache_;
  std::vector<StreamShard> shards_;  // in checkpoint shard order
  std::vector<int> local_fds_;       // whole local shards, else -1
  std::vector<std::string> direct_urls_;  // where each shard's URL redirected to (guarded by mu_)

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stop_ = false;
  std::vector<std::thread> workers_;

  std::atomic<uint64_t> spans_requested_{0}, spans_fetched_{0}, local_reads_{0}, network_bytes_{0}, requests_{0},
      retries_{0};
};

}  // namespace

StreamConfig load_stream_config(const std::string& model_dir, RetryHook on_retry) {
  StreamConfig c;
  c.on_retry = std::move(on_retry);
  c.manifest = read_stream_manifest(model_dir);
  c.cache_dir = model_dir + "/" + kSpanCacheDirName;
  c.bearer_token = hf_token();
  return c;
}

std::unique_ptr<ExpertSource> make_http_expert_source(const Checkpoint& ck, const StreamConfig& config) {
  return std::make_unique<HttpExperts>(ck, config);
}

MissFillerFactory stream_miss_filler(const std::string& model_dir, RetryHook on_retry) {
  if (!stream_manifest_exists(model_dir)) return {};
  return [model_dir, on_retry](const Checkpoint& ck) {
    return make_http_expert_source(ck, load_stream_config(model_dir, on_retry));
  };
}

bool stream_stats(const ExpertSource& source, StreamStats* out) {
  for (const ExpertSource* s = &source; s; s = s->miss_filler()) {
    if (const auto* h = dynamic_cast<const HttpExperts*>(s)) {
      *out = h->stream_stats();
      return true;
    }
  }
  return false;
}

}  // namespace sluice
