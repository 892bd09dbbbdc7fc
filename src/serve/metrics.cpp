#include "serve/metrics.h"

#include <cmath>
#include <cstdio>

#include "base/error.h"

namespace sluice::serve {

namespace {

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[40];
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string label_text(const Metrics::Labels& labels, const std::string& extra_key = "",
                       const std::string& extra_value = "") {
  if (labels.empty() && extra_key.empty()) return "";
  std::string s = "{";
  bool first = true;
  for (auto& [k, v] : labels) {
    if (!first) s += ",";
    s += k + "=\"" + prometheus_escape(v) + "\"";
    first = false;
  }
  if (!extra_key.empty()) {
    if (!first) s += ",";
    s += extra_key + "=\"" + extra_value + "\"";
  }
  return s + "}";
}

}  // namespace

std::string prometheus_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void Metrics::counter(const std::string& name, const std::string& help) {
  std::lock_guard<std::mutex> lock(mu_);
  families_.push_back({name, help, "counter", {}, {}, {}});
}

void Metrics::gauge(const std::string& name, const std::string& help) {
  std::lock_guard<std::mutex> lock(mu_);
  families_.push_back({name, help, "gauge", {}, {}, {}});
}

void Metrics::histogram(const std::string& name, const std::string& help, std::vector<double> buckets) {
  std::lock_guard<std::mutex> lock(mu_);
  families_.push_back({name, help, "histogram", std::move(buckets), {}, {}});
}

Metrics::Family& Metrics::family(const std::string& name) {
  for (Family& f : families_)
    if (f.name == name) return f;
  fail("metrics", "no metric named " + name);
}

void Metrics::add(const std::string& name, double v, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  family(name).values[labels] += v;
}

void Metrics::set(const std::string& name, double v, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  family(name).values[labels] = v;
}

void Metrics::observe(const std::string& name, double v, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = family(name);
  Hist& h = f.hists[labels];
  if (h.counts.empty()) h.counts.assign(f.buckets.size() + 1, 0);
  size_t i = 0;
  while (i < f.buckets.size() && v > f.buckets[i]) i++;
  h.counts[i]++;
  h.sum += v;
  h.count++;
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const Family& f : families_) {
    out += "# HELP " + f.name + " " + f.help + "\n";
    out += "# TYPE " + f.name + " " + f.type + "\n";
    if (f.type != "histogram") {
      // A family with no samples yet shows its zero, so dashboards see it from the start.
      if (f.values.empty()) out += f.name + " 0\n";
      for (auto& [labels, v] : f.values) out += f.name + label_text(labels) + " " + number(v) + "\n";
      continue;
    }
    std::map<Labels, Hist> hists = f.hists;
    if (hists.empty()) hists[{}].counts.assign(f.buckets.size() + 1, 0);
    for (auto& [labels, h] : hists) {
      uint64_t cum = 0;
      for (size_t i = 0; i <= f.buckets.size(); i++) {
        cum += h.counts[i];
        std::string le = i < f.buckets.size() ? number(f.buckets[i]) : "+Inf";
        out += f.name + "_bucket" + label_text(labels, "le", le) + " " + number(double(cum)) + "\n";
      }
      out += f.name + "_sum" + label_text(labels) + " " + number(h.sum) + "\n";
      out += f.name + "_count" + label_text(labels) + " " + number(double(h.count)) + "\n";
    }
  }
  return out;
}

}  // namespace sluice::serve
