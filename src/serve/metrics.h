// serve/metrics.h — counters, gauges and histograms rendered in the Prometheus
// text format (version 0.0.4: `# HELP`, `# TYPE`, then samples), for GET /metrics.
//
// A Metrics object holds a fixed set of families declared up front; each family
// has samples keyed by a label set. Thread-safe: every update takes one mutex,
// which is cheap next to a decode step.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace sluice::serve {

class Metrics {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;

  // Declarations (before use). Histogram buckets are upper bounds, ascending; +Inf is added.
  void counter(const std::string& name, const std::string& help);
  void gauge(const std::string& name, const std::string& help);
  void histogram(const std::string& name, const std::string& help, std::vector<double> buckets);

  void add(const std::string& name, double v, const Labels& labels = {});  // counter += v
  void set(const std::string& name, double v, const Labels& labels = {});  // gauge (or a counter's total)
  void observe(const std::string& name, double v, const Labels& labels = {});

  // The text exposition format; families in declaration order.
  std::string render() const;

 private:
  struct Hist {
    std::vector<uint64_t> counts;  // per bucket (not cumulative), then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  struct Family {
    std::string name, help, type;
    std::vector<double> buckets;
    std::map<Labels, double> values;
    std::map<Labels, Hist> hists;
  };
  Family& family(const std::string& name);

  mutable std::mutex mu_;
  std::vector<Family> families_;
};

// Label values escaped for the text format (backslash, quote, newline).
std::string prometheus_escape(const std::string& s);

}  // namespace sluice::serve
