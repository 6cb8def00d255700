// clip_grad_norm against an fp64 reference: the global L2 norm over all gradients, the
// scaling only when max_norm / (norm + 1e-6) < 1, skipped undefined gradients, bf16
// gradients, non-finite norms returned without touching the gradients, and a result that
// is bitwise the same on one thread and on several; the squared norm's partial sums in one
// ledger workspace.
#include "optim/clip.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>

#include "autograd/variable.h"
#include "tensor/backend/profile.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/ops/optim_update.h"
#include "tests/tensor/memory/events_since.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::optim {
namespace {

using testing::random_tensor;

// Parameters with gradients of `shapes`, drawn from `seed`.
std::vector<Tensor> with_grads(const std::vector<Shape>& shapes, uint64_t seed,
                               DType dtype = DType::f32, double scale = 1.0) {
  std::vector<Tensor> params;
  for (const Shape& s : shapes) {
    Tensor p = Tensor::zeros(s);
    autograd::set_requires_grad(p);
    autograd::ensure_meta(p).grad = random_tensor(s, seed++, dtype, -scale, scale);
    params.push_back(p);
  }
  return params;
}

double reference_norm(const std::vector<Tensor>& params) {
  double sum = 0;
  for (const Tensor& p : params)
    for (double x : testing::to_f64(autograd::grad(p))) sum += x * x;
  return std::sqrt(sum);
}

struct ClipCase {
  const char* name;
  double scale;     // gradients uniform in [-scale, scale)
  double max_norm;  // clipping happens when the norm exceeds it
  DType dtype;
};

class ClipGradNorm : public ::testing::TestWithParam<ClipCase> {};

TEST_P(ClipGradNorm, MatchesAnFp64Reference) {
  const ClipCase& c = GetParam();
  auto params = with_grads({{7, 5}, {40000}, {3}}, 11, c.dtype, c.scale);
  std::vector<std::vector<double>> before;
  for (const Tensor& p : params) before.push_back(testing::to_f64(autograd::grad(p)));
  const double want = reference_norm(params);
  const double got = clip_grad_norm(params, c.max_norm);
  EXPECT_NEAR(got, want, 1e-12 * want);
  const double coef = c.max_norm / (want + 1e-6);
  const auto tol = testing::tolerance_for(c.dtype);
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<double> expected = before[i];
    if (coef < 1)
      for (double& x : expected) x *= coef;
    EXPECT_TRUE(testing::all_close(testing::to_f64(autograd::grad(params[i])), expected,
                                   c.dtype == DType::f32 ? 1e-6 : tol.rtol, 0))
        << c.name << " param " << i;
  }
  if (coef < 1) {  // the clipped norm is max_norm, up to rounding into the dtype
    const double rtol = c.dtype == DType::f32 ? 1e-6 : 1.0 / 256;
    EXPECT_NEAR(reference_norm(params), c.max_norm, rtol * c.max_norm);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ClipGradNorm,
                         ::testing::Values(ClipCase{"clipped", 1.0, 1.0, DType::f32},
                                           ClipCase{"not_clipped", 1e-3, 1.0, DType::f32},
                                           ClipCase{"bf16_clipped", 1.0, 2.0, DType::bf16}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ClipGradNormTest, SkipsUndefinedGradients) {
  auto params = with_grads({{4, 4}, {10}}, 3);
  Tensor no_grad = Tensor::zeros({5});
  params.push_back(no_grad);
  const double want = reference_norm({params[0], params[1]});
  EXPECT_NEAR(clip_grad_norm(params, 1e9), want, 1e-12 * want);
  EXPECT_FALSE(autograd::grad(no_grad).defined());
}

TEST(ClipGradNormTest, NonFiniteNormIsReturnedAndGradientsAreLeftAlone) {
  for (const double bad :
       {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    auto params = with_grads({{6}, {3, 3}}, 5);
    autograd::grad(params[1]).set({1, 2}, bad);
    const auto before = testing::to_f64(autograd::grad(params[0]));
    const double norm = clip_grad_norm(params, 1.0);
    EXPECT_FALSE(std::isfinite(norm));
    EXPECT_EQ(std::isnan(norm), std::isnan(bad));
    EXPECT_EQ(testing::to_f64(autograd::grad(params[0])), before);
  }
}

TEST(ClipGradNormTest, NormIsBitwiseTheSameOnOneAndManyThreads) {
  auto params = with_grads({{1000, 333}, {77}}, 9);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const double one = clip_grad_norm(params, 1e12);
  omp_set_num_threads(std::max(threads, 4));
  const double many = clip_grad_norm(params, 1e12);
  omp_set_num_threads(threads);
  EXPECT_EQ(one, many);
}

TEST(ClipGradNormTest, RejectsANonPositiveMaxNorm) {
  testing::expect_error([] { clip_grad_norm({}, 0.0); }, "[clip_grad_norm]", "max_norm");
}

}  // namespace
}  // namespace fitgrad::optim

namespace fitgrad::optim {
namespace {

// The squared norm's per-chunk partial sums live in one front-end workspace (temporary, its
// size the backend's rule), not in a kernel-side vector: 100,000 elements are 7 chunks.
TEST(SumSquares, PartialsAreOneLedgerWorkspace) {
  const Tensor x = testing::random_tensor({100000}, 71);
  double want = 0;
  for (double v : testing::to_f64(x)) want += v * v;
  CachingAllocator& cpu = allocator_for(Device::cpu());
  const Tensor acc = ops::zero_doubles(1, Device::cpu());  // the caller's, before the events
  const uint64_t first = cpu.total_events();
  ops::sum_squares_add_(x, acc);
  const double got = ops::read_double(acc);
  std::vector<std::pair<uint64_t, Category>> allocs;
  for (const MemoryEvent& e : testing::allocations_since(first))
    allocs.push_back({e.requested, e.category});
  EXPECT_NEAR(got, want, 1e-12 * want);
  const int64_t doubles =
      backend::sum_squares_workspace_doubles(backend::host_cpu_profile(), 100000);
  EXPECT_EQ(doubles, 7);
  EXPECT_EQ(
      allocs,
      (std::vector<std::pair<uint64_t, Category>>{{uint64_t(doubles) * 8, Category::temporary}}));
}

}  // namespace
}  // namespace fitgrad::optim
