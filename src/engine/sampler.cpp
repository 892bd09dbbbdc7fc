#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"
#include "base/splitmix.h"

namespace sluice {

namespace {

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// Higher logit first; the lower id wins a tie, so the order is total.
bool before(const std::pair<float, int>& a, const std::pair<float, int>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

void check_logits(std::span<const float> logits) {
  if (logits.empty()) fail("sampler", "empty logits");
  for (float l : logits)
    if (std::isnan(l) || l == INFINITY) fail("sampler", "logits contain NaN or +inf");
}

// Fills cand with the surviving (logit, id) pairs and prob with their
// unnormalised probabilities; returns the total. Pairs are most probable first
// when anything was truncated, in id order otherwise.
double truncate(std::span<const float> logits, const SamplingParams& p, std::vector<std::pair<float, int>>& cand,
                std::vector<double>& prob) {
  cand.clear();
  for (size_t i = 0; i < logits.size(); i++)
    if (logits[i] != -INFINITY) cand.push_back({logits[i], int(i)});
  if (cand.empty()) fail("sampler", "every logit is -inf");
  if (p.top_k > 0 && size_t(p.top_k) < cand.size()) {
    std::nth_element(cand.begin(), cand.begin() + p.top_k, cand.end(), before);
    cand.resize(size_t(p.top_k));
    std::sort(cand.begin(), cand.end(), before);
  }
  float lmax = cand[0].first;
  for (auto& c : cand) lmax = std::max(lmax, c.first);
  const double inv_t = 1.0 / double(p.temperature);
  double total = 0;
  for (auto& c : cand) total += std::exp((double(c.first) - lmax) * inv_t);

  if (p.top_p < 1.0f) {
    // Sort only as far as needed: grow a sorted prefix until it holds top_p of the mass.
    const double want = double(p.top_p) * total;
    size_t sorted = std::min<size_t>(64, cand.size());
    for (;;) {
      std::partial_sort(cand.begin(), cand.begin() + long(sorted), cand.end(), before);
      double cum = 0;
      size_t keep = 0;
      while (keep < sorted) {
        cum += std::exp((double(cand[keep].first) - lmax) * inv_t);
        keep++;
        if (cum >= want) break;
      }
      if (cum >= want || sorted == cand.size()) {
        cand.resize(keep);
        break;
      }
      sorted = std::min(cand.size(), sorted * 4);
    }
  }
  prob.resize(cand.size());
  total = 0;
  for (size_t i = 0; i < cand.size(); i++) total += prob[i] = std::exp((double(cand[i].first) - lmax) * inv_t);
  return total;
}

}  // namespace

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (auto& w : s) w = splitmix64(x);
}

uint64_t Rng::next() {
  const uint64_t out = rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return out;
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

void check_sampling_params(const SamplingParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0)
    fail("sampler", "temperature must be a finite number >= 0, got " + std::to_string(p.temperature));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) fail("sampler", "top_p must be in (0, 1], got " + std::to_string(p.top_p));
  if (p.top_k < 0) fail("sampler", "top_k must be >= 0, got " + std::to_string(p.top_k));
}

int argmax_logit(std::span<const float> logits) {
  return int(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::vector<Candidate> sampling_distribution(std::span<const float> logits, const SamplingParams& p) {
  check_sampling_params(p);
  check_logits(logits);
  if (p.temperature == 0.0f || p.top_k == 1) return {{argmax_logit(logits), 1.0}};
  std::vector<std::pair<float, int>> cand;
  std::vector<double> prob;
  double total = truncate(logits, p, cand, prob);
  std::vector<Candidate> out(cand.size());
  for (size_t i = 0; i < cand.size(); i++) out[i] = {cand[i].second, prob[i] / total};
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) { return a.p > b.p; });
  return out;
}

Sampler::Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) { check_sampling_params(p); }

int Sampler::sample(std::span<const float> logits) {
  check_logits(logits);
  if (greedy()) return argmax_logit(logits);
  double total = truncate(logits, p_, cand_, prob_);
  double u = rng_.uniform() * total;
  for (size_t i = 0; i < cand_.size(); i++) {
    u -= prob_[i];
    if (u < 0) return cand_[i].second;
  }
  return cand_.back().second;  // rounding left u a hair above zero
}

int Sampler::sample_draft(std::span<const float> logits, int draft, bool* accepted) {
  const int t = sample(logits);
  *accepted = t == draft;
  return t;
}

void log_softmax(std::span<const float> logits, std::vector<float>& out) {
  out.resize(logits.size());
  if (logits.empty()) return;
  const float lmax = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - lmax);
  const double lse = double(lmax) + std::log(sum);
  for (size_t i = 0; i < logits.size(); i++) out[i] = float(double(logits[i]) - lse);
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logprobs, int k) {
  std::vector<std::pair<float, int>> all(logprobs.size());
  for (size_t i = 0; i < logprobs.size(); i++) all[i] = {logprobs[i], int(i)};
  size_t n = std::min(all.size(), size_t(std::max(k, 0)));
  std::partial_sort(all.begin(), all.begin() + long(n), all.end(), before);
  std::vector<TokenLogprob> out(n);
  for (size_t i = 0; i < n; i++) out[i] = {all[i].second, all[i].first};
  return out;
}

}  // namespace sluice
