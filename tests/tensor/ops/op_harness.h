// The shared harness of the op tests (issue 3): seeded random inputs, fp64 views of
// tensors, central finite differences in fp64, and closeness with a report of the worst
// element. Each op test writes its own fp64 reference forward as plain loops; the analytic
// backward of the fitgrad op is then checked against finite differences of that reference,
// so neither the forward nor the backward is its own oracle.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tensor/error.h"
#include "tensor/tensor.h"

namespace fitgrad::testing {

// Uniform values in [lo, hi) from mt19937_64(seed), stored as `dtype` on the CPU.
inline Tensor random_tensor(const Shape& shape, uint64_t seed, DType dtype = DType::f32,
                            double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(size_t(numel(shape)));
  for (double& x : v) x = dist(rng);
  return Tensor::from_vector(v, shape, dtype);
}

// Token ids (B, T) i64, uniform in [0, vocab) from mt19937_64(seed).
inline Tensor random_ids(int64_t b, int64_t t, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> v(size_t(b * t));
  for (auto& x : v) x = int64_t(rng() % uint64_t(vocab));
  return Tensor::from_vector(v, {b, t}, DType::i64);
}

// Row-major values of any tensor, as doubles.
inline std::vector<double> to_f64(const Tensor& t) { return t.to_vector<double>(); }

// Central finite differences of f at x: (f(x + h e_i) - f(x - h e_i)) / 2h for every i.
inline std::vector<double> finite_diff(const std::function<double(const std::vector<double>&)>& f,
                                       std::vector<double> x, double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = f(x);
    x[i] = saved - h;
    const double down = f(x);
    x[i] = saved;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

// |got - want| <= bound elementwise, each element with its own bound; on failure names the
// worst element.
inline ::testing::AssertionResult all_within(const std::vector<double>& got,
                                             const std::vector<double>& want,
                                             const std::vector<double>& bound) {
  if (got.size() != want.size() || bound.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size()
                                         << " (bounds " << bound.size() << ")";
  size_t worst = 0, bad = 0;
  double worst_excess = -INFINITY;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool nan_mismatch = std::isnan(got[i]) != std::isnan(want[i]);
    const double excess = nan_mismatch ? INFINITY : std::fabs(got[i] - want[i]) - bound[i];
    if (excess > 0) ++bad;
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " elements differ; worst at " << worst << ": got "
         << got[worst] << ", want " << want[worst] << " (bound " << bound[worst] << ")";
}

// |got - want| <= atol + rtol * |want| elementwise; on failure names the worst element.
inline ::testing::AssertionResult all_close(const std::vector<double>& got,
                                            const std::vector<double>& want, double rtol,
                                            double atol) {
  std::vector<double> bound(want.size());
  for (size_t i = 0; i < want.size(); ++i) bound[i] = atol + rtol * std::fabs(want[i]);
  ::testing::AssertionResult r = all_within(got, want, bound);
  if (!r) r << " (rtol " << rtol << ", atol " << atol << ")";
  return r;
}

// The message of the fitgrad::Error that fn throws, or "(no error)" when it throws none.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Runs fn and expects a fitgrad::Error whose message starts with `prefix` (the op, as
// "[softmax]") and contains `part`.
inline void expect_error(const std::function<void()>& fn, const std::string& prefix,
                         const std::string& part = "") {
  try {
    fn();
    ADD_FAILURE() << "no error, expected one starting with " << prefix;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(prefix, 0), 0u) << what;
    EXPECT_NE(what.find(part), std::string::npos) << what;
  }
}

// Note [Op test tolerances]
// A result computed in f32 from exact inputs and rounded once to its dtype is within half
// an ulp of the exact value: 2^-8 of |want| in bf16, 2^-11 in f16. rtol is twice that (2^-7,
// 2^-10), which leaves room for the f32 arithmetic before the rounding. atol is that half
// ulp of the tensor's largest |want| (Tolerance::atol is a fraction of max |want|, see
// close_for), so an element far below the tensor's scale is still checked to a bound that
// follows the scale, not to a fixed 1e-2 that is larger than a typical bf16 gradient; it only
// covers elements that are small through cancellation, where a rounding of the larger
// terms dominates. f32 results get rtol 1e-5 and atol 1e-6 of max |want|.
struct Tolerance {
  double rtol;
  double atol;  // a fraction of max |want|
};
inline Tolerance tolerance_for(DType dtype) {
  switch (dtype) {
    case DType::bf16: return {0x1p-7, 0x1p-8};
    case DType::f16: return {0x1p-10, 0x1p-11};
    default: return {1e-5, 1e-6};
  }
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// all_close with the tolerance of `dtype` (Note [Op test tolerances]), both bounds times k
// where a test argues for more room.
inline ::testing::AssertionResult close_for(DType dtype, const std::vector<double>& got,
                                            const std::vector<double>& want, double k = 1.0) {
  const Tolerance t = tolerance_for(dtype);
  return all_close(got, want, k * t.rtol, k * t.atol * max_abs(want));
}

}  // namespace fitgrad::testing
