#include "k3/experts.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "base/error.h"

namespace sluice {

namespace {

class PreadExperts : public ExpertSource {
 public:
  explicit PreadExperts(const Checkpoint& ck) : ck_(ck) {
    for (const std::string& path : ck.shard_paths) {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        for (int f : fds_) ::close(f);
        fail(path, std::string("cannot open: ") + std::strerror(errno));
      }
      fds_.push_back(fd);
    }
  }
  ~PreadExperts() override {
    for (int fd : fds_) ::close(fd);
  }

  void fetch(int layer, std::span<const int> experts,
             const std::function<void(size_t, const uint8_t*)>& use) override {
    for (size_t i = 0; i < experts.size(); i++) {
      const ExpertSpan& s = ck_.experts.at(size_t(layer)).at(size_t(experts[i]));
      buf_.resize(s.length);
      uint64_t got = 0;
      while (got < s.length) {
        ssize_t r = pread(fds_[size_t(s.shard)], buf_.data() + got, s.length - got, off_t(s.offset + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
          fail(ck_.shard_paths[size_t(s.shard)],
               r == 0 ? "truncated: expert " + std::to_string(experts[i]) + " of layer " + std::to_string(layer) +
                            " runs past the end of the file"
                      : std::string("read error: ") + std::strerror(errno));
        got += uint64_t(r);
      }
      use(i, buf_.data());
    }
  }

 private:
  const Checkpoint& ck_;
  std::vector<int> fds_;
  std::vector<uint8_t> buf_;
};

}  // namespace

std::unique_ptr<ExpertSource> make_pread_expert_source(const Checkpoint& ck) {
  return std::make_unique<PreadExperts>(ck);
}

}  // namespace sluice
