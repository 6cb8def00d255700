// Comparing a computed tensor with a stored golden one, shared by the model-level golden
// tests (golden_block_test.cpp, golden_llama_test.cpp).
//
// Note [Golden block tolerances]
// The gradients pass through ~30 ops (two blocks, the head, cross-entropy), each rounding
// in f32 in its own summation order; torch's own float32 run of the same model is off its
// float64 result by up to ~1.5e-6 normwise (meta "torch_f32_err"). A correct fitgrad gets
// within a small multiple of that: each element must satisfy
// |got - want| <= 1e-4 |want| + 1e-5 max|want|. The absolute term, relative to the
// tensor's largest element, covers the elements that cancel to near zero (their relative
// error is unbounded in any f32 implementation, torch's included).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/golden/golden_file.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {

// Checks `got` against the stored tensor `stored` under Note [Golden block tolerances];
// with GOLDEN_VERBOSE set, prints the normwise error beside torch's own f32 error.
inline void expect_matches_golden(const GoldenFile& file, const std::string& what,
                                  const Tensor& got, const std::string& stored) {
  const Tensor want = file.tensor(stored);
  ASSERT_TRUE(got.defined()) << what << " was not computed";
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const auto g = to_f64(got), w = to_f64(want);
  double scale = 0, err = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    scale = std::max(scale, std::fabs(w[i]));
    err = std::max(err, std::fabs(g[i] - w[i]));
  }
  EXPECT_TRUE(all_close(g, w, 1e-4, 1e-5 * scale)) << what;
  if (std::getenv("GOLDEN_VERBOSE"))
    std::printf("[golden] %-56s normwise err %.2e (torch f32 %.2e)\n", what.c_str(),
                scale > 0 ? err / scale : err,
                file.meta().value("torch_f32_err", nlohmann::json::object()).value(stored, 0.0));
}

}  // namespace fitgrad::testing
