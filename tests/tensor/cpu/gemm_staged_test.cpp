// The staged low-precision GEMM (tensor/cpu/gemm_staged.h) against an fp64 product of the
// same f16/bf16 values: every transpose, leading dimensions wider than the matrices, a
// bias, sizes that span several blocks in m, n and k, an empty k. Then an f16 linear as
// the ledger sees it: its output and one bounded f32 workspace (Note [Native products] in
// tensor/ops/matmul.cpp).
#include "tensor/cpu/gemm_staged.h"

#include <gtest/gtest.h>

#include "tensor/backend/profile.h"
#include "tensor/convert.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/ops/matmul.h"
#include "tests/tensor/memory/events_since.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

struct StagedCase {
  bool ta, tb;
  int64_t m, n, k, pad;  // pad: extra columns of every stored operand (leading dimensions)
  bool bias;
};

// A (rows, ld) matrix of E, plus its values as doubles.
template <class E>
struct Stored {
  std::vector<E> data;
  std::vector<double> values;
};
template <class E>
Stored<E> stored(int64_t rows, int64_t ld, uint64_t seed, DType dtype) {
  Stored<E> s;
  s.values = to_f64(random_tensor({rows, ld}, seed, dtype));
  for (double v : s.values) s.data.push_back(convert<E>(float(v)));
  return s;
}

template <class E>
void check_cases(DType dtype) {
  const StagedCase cases[] = {
      {false, false, 17, 23, 31, 0, false},
      {true, false, 17, 23, 31, 3, true},
      {false, true, 9, 40, 64, 5, true},
      {true, true, 33, 8, 12, 1, false},
      // Two blocks in m (1024), n (1024) and k (512), each with a ragged remainder.
      {false, true, 1100, 1100, 600, 2, true},
      {true, false, 1030, 1030, 520, 0, false},
  };
  for (const StagedCase& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << dtype_name(dtype) << " ta " << c.ta << " tb " << c.tb << " m " << c.m << " n "
                 << c.n << " k " << c.k << " pad " << c.pad << " bias " << c.bias);
    const int64_t a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k;
    const int64_t b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n;
    const int64_t lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.n + c.pad;
    const Stored<E> a = stored<E>(a_rows, lda, 1, dtype), b = stored<E>(b_rows, ldb, 2, dtype),
                    bias = stored<E>(1, c.n, 3, dtype);
    std::vector<double> want(size_t(c.m * c.n)), got(want.size());
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double s = c.bias ? bias.values[size_t(j)] : 0.0;
        for (int64_t p = 0; p < c.k; ++p)
          s += (c.ta ? a.values[size_t(p * lda + i)] : a.values[size_t(i * lda + p)]) *
               (c.tb ? b.values[size_t(j * ldb + p)] : b.values[size_t(p * ldb + j)]);
        want[size_t(i * c.n + j)] = s;
      }
    std::vector<E> out(size_t(c.m * ldc), convert<E>(-7.0f));
    std::vector<float> workspace(size_t(cpu::gemm_staged_workspace_floats(c.m, c.n, c.k)));
    cpu::gemm_staged(c.ta, c.tb, c.m, c.n, c.k, a.data.data(), lda, b.data.data(), ldb,
                     c.bias ? bias.data.data() : nullptr, out.data(), ldc, false, workspace.data());
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j)
        got[size_t(i * c.n + j)] = double(convert<float>(out[size_t(i * ldc + j)]));
    // f32 accumulation of k exact products is within about k 2^-24 of the sum of |terms|
    // (|terms| <= 1 here); the result adds one rounding to the dtype.
    const double rtol = dtype == DType::f16 ? 0x1p-11 : 0x1p-8;
    EXPECT_TRUE(all_close(got, want, rtol, double(c.k + 1) * double(c.k) * 0x1p-24 + 1e-6));
    if (c.pad > 0) {
      EXPECT_EQ(convert<float>(out[size_t(c.n)]), -7.0f) << "wrote past n";
    }
  }
  // An empty k gives the bias (or zeros) on every row.
  const std::vector<E> b2 = {convert<E>(1.5f), convert<E>(-2.0f)};
  std::vector<E> c4(4, convert<E>(9.0f));
  std::vector<float> ws(size_t(cpu::gemm_staged_workspace_floats(2, 2, 0)));
  cpu::gemm_staged<E>(false, false, 2, 2, 0, nullptr, 1, nullptr, 2, b2.data(), c4.data(), 2, false,
                      ws.data());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(convert<float>(c4[size_t(i)]), i % 2 ? -2.0f : 1.5f);
}

TEST(GemmStaged, F16MatchesAnFp64ProductOfTheSameValues) { check_cases<Half>(DType::f16); }
TEST(GemmStaged, Bf16MatchesAnFp64ProductOfTheSameValues) { check_cases<BFloat16>(DType::bf16); }

TEST(GemmStaged, WorkspaceIsBoundedWhateverTheSizes) {
  EXPECT_EQ(cpu::gemm_staged_workspace_floats(3, 5, 7), 3 * 7 + 7 * 5 + 3 * 5);
  const int64_t bound = 1024 * 512 + 512 * 1024 + 1024 * 1024;  // Note [Staged GEMM blocks]
  EXPECT_EQ(cpu::gemm_staged_workspace_floats(1 << 20, 1 << 20, 1 << 20), bound);
}

// An f16 linear allocates its (rows, out) result and the staging workspace, nothing else: no
// f32 copy of x, of the weight or of the output.
TEST(GemmStaged, F16LinearAllocatesItsOutputAndOneWorkspace) {
  const Tensor x = random_tensor({300, 128}, 4, DType::f16);
  const Tensor w = random_tensor({1100, 128}, 5, DType::f16);
  const Tensor b = random_tensor({1100}, 6, DType::f16);
  CachingAllocator& cpu = allocator_for(Device::cpu());
  const uint64_t first = cpu.total_events();
  const Tensor y = ops::linear(x, w, b);
  const std::vector<uint64_t> allocs = requested_since(first);
  const uint64_t workspace = uint64_t(cpu::gemm_staged_workspace_floats(300, 1100, 128)) * 4;
  EXPECT_EQ(allocs, (std::vector<uint64_t>{300 * 1100 * 2, workspace}));
  EXPECT_EQ(y.dtype(), DType::f16);
  // And the value: the f32 linear on the widened operands, rounded (the blocks may round the
  // f32 sums differently by an ulp, so within f16's tolerance rather than bitwise).
  const Tensor want =
      ops::linear(x.to(DType::f32), w.to(DType::f32), b.to(DType::f32)).to(DType::f16);
  EXPECT_TRUE(close_for(DType::f16, to_f64(y), to_f64(want)));
}

}  // namespace
}  // namespace fitgrad::testing
