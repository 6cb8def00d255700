// Temperature, top-k and top-p sampling (sampling.h).
#include "nn/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tensor/error.h"
#include "tensor/random/philox.h"

namespace fitgrad::nn {

void SamplingOptions::validate() const {
  FG_CHECK(std::isfinite(temperature) && temperature >= 0,
           "[sampling] temperature must be >= 0, got {}", temperature);
  FG_CHECK(top_k >= 0, "[sampling] top_k must be >= 0 (0: off), got {}", top_k);
  FG_CHECK(top_p > 0 && top_p <= 1, "[sampling] top_p must be in (0, 1], got {}", top_p);
}

namespace {

std::vector<float> logits_of(const Tensor& logits) {
  FG_CHECK(logits.dim() == 1 && logits.numel() > 0 && is_floating(logits.dtype()),
           "[sampling] logits must be a non-empty 1-d float tensor, got {} of {}",
           shape_str(logits.shape()), dtype_name(logits.dtype()));
  return logits.to_vector<float>();
}

int32_t argmax(const std::vector<float>& x) {
  return int32_t(std::max_element(x.begin(), x.end()) - x.begin());
}

}  // namespace

std::vector<double> sampling_distribution(const Tensor& logits_tensor,
                                          const SamplingOptions& options) {
  options.validate();
  const std::vector<float> logits = logits_of(logits_tensor);
  const size_t v = logits.size();
  std::vector<double> p(v, 0.0);
  if (options.temperature == 0) {
    p[size_t(argmax(logits))] = 1.0;
    return p;
  }
  // Softmax of logits / temperature, shifted by the maximum.
  const double top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (size_t i = 0; i < v; ++i) sum += p[i] = std::exp((logits[i] - top) / options.temperature);
  for (double& x : p) x /= sum;
  if (options.top_k == 0 && options.top_p == 1) return p;
  // Ids by decreasing probability, ties toward lower ids.
  std::vector<int32_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return p[size_t(a)] > p[size_t(b)]; });
  size_t keep = v;
  if (options.top_k > 0) keep = std::min(keep, size_t(options.top_k));
  if (options.top_p < 1) {
    double kept_mass = 0;
    for (size_t i = 0; i < keep; ++i) kept_mass += p[size_t(order[i])];
    double cumulative = 0;
    size_t n = 0;
    while (n < keep) {
      cumulative += p[size_t(order[n++])] / kept_mass;
      if (cumulative >= options.top_p) break;
    }
    keep = n;
  }
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += p[size_t(order[i])];
  for (size_t i = keep; i < v; ++i) p[size_t(order[i])] = 0;
  for (double& x : p) x /= kept;
  return p;
}

int32_t sample_token(const Tensor& logits, const SamplingOptions& options, Generator& generator) {
  if (options.temperature == 0) {
    options.validate();
    return argmax(logits_of(logits));
  }
  const std::vector<double> p = sampling_distribution(logits, options);
  const RngState s = generator.reserve(1);
  const double u = philox_uniform(s.seed, s.offset);
  double cumulative = 0;
  int32_t last = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) continue;
    last = int32_t(i);
    cumulative += p[i];
    if (u < cumulative) return last;
  }
  return last;  // u within rounding of 1: the last kept id
}

}  // namespace fitgrad::nn
