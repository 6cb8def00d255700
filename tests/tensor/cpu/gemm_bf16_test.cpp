// The bf16 GEMM (tensor/cpu/gemm_bf16.h) against an fp64 product of the same bf16 values:
// every transpose, leading dimensions wider than the matrices, a bias, f32 and bf16 results,
// an empty k, and two runs bitwise equal. Then the bf16 linear as the ledger sees it: only
// its output is allocated (Note [Native products] in tensor/ops/matmul.cpp).
#include "tensor/cpu/gemm_bf16.h"

#include <gtest/gtest.h>

#include "tensor/backend/profile.h"
#include "tensor/cpu/dnnl_matmul.h"
#include "tensor/cpu_isa.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/ops/matmul.h"
#include "tests/tensor/memory/events_since.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

struct GemmCase {
  bool ta, tb;
  int64_t m, n, k, pad;  // pad: extra columns of every stored operand (leading dimensions)
  bool bias;
  DType out;
};

// A (rows, cols) matrix stored with `ld` >= cols, as bf16, plus its values as doubles.
struct Stored {
  std::vector<BFloat16> data;
  std::vector<double> values;  // the stored values, row-major (rows, ld)
};
Stored stored(int64_t rows, int64_t ld, uint64_t seed) {
  const Tensor t = random_tensor({rows, ld}, seed, DType::bf16);
  Stored s;
  s.values = to_f64(t);
  for (double v : s.values) s.data.push_back(BFloat16(float(v)));
  return s;
}

TEST(GemmBf16, MatchesAnFp64ProductOfTheSameValues) {
  if (!cpu::gemm_bf16_available())
    GTEST_SKIP() << "no oneDNN bf16 GEMM here (no oneDNN, or below AVX-512: see IsaPaths)";
  const GemmCase cases[] = {
      {false, false, 17, 23, 31, 0, false, DType::f32},
      {true, false, 17, 23, 31, 3, true, DType::f32},
      {false, true, 9, 40, 64, 5, true, DType::bf16},
      {true, true, 33, 8, 12, 1, false, DType::bf16},
      {false, true, 64, 64, 256, 0, true, DType::f32},
  };
  for (const GemmCase& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "ta " << c.ta << " tb " << c.tb << " m " << c.m << " n " << c.n << " k " << c.k
                 << " pad " << c.pad << " bias " << c.bias << " out " << dtype_name(c.out));
    const int64_t a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k;
    const int64_t b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n;
    const int64_t lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.n + c.pad;
    const Stored a = stored(a_rows, lda, 1), b = stored(b_rows, ldb, 2), bias = stored(1, c.n, 3);
    auto A = [&](int64_t i, int64_t p) {
      return c.ta ? a.values[p * lda + i] : a.values[i * lda + p];
    };
    auto B = [&](int64_t p, int64_t j) {
      return c.tb ? b.values[j * ldb + p] : b.values[p * ldb + j];
    };
    std::vector<double> want(size_t(c.m * c.n)), got(want.size());
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double s = c.bias ? bias.values[j] : 0.0;
        for (int64_t p = 0; p < c.k; ++p) s += A(i, p) * B(p, j);
        want[size_t(i * c.n + j)] = s;
      }
    std::vector<float> c32(size_t(c.m * ldc), -7.0f);
    std::vector<BFloat16> c16(size_t(c.m * ldc), BFloat16(-7.0f));
    void* out =
        c.out == DType::f32 ? static_cast<void*>(c32.data()) : static_cast<void*>(c16.data());
    cpu::gemm_bf16(c.ta, c.tb, c.m, c.n, c.k, a.data.data(), lda, b.data.data(), ldb,
                   c.bias ? bias.data.data() : nullptr, out, c.out, ldc);
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j)
        got[size_t(i * c.n + j)] = c.out == DType::f32 ? double(c32[size_t(i * ldc + j)])
                                                       : double(float(c16[size_t(i * ldc + j)]));
    // f32 accumulation of k bf16 products (each exact in f32) is within k * 2^-24 of the sum
    // of |terms|; a bf16 result adds one rounding, 2^-8 relative.
    double scale = 0;
    for (double w : want) scale = std::max(scale, std::fabs(w));
    const double rtol = c.out == DType::f32 ? 0 : 0x1p-8;
    EXPECT_TRUE(all_close(got, want, rtol, double(c.k + 1) * 0x1p-24 * double(c.k) + 1e-6 * scale));
    if (c.pad > 0 && c.out == DType::f32) {
      EXPECT_EQ(c32[size_t(c.n)], -7.0f) << "wrote past n";
    }
    // Bitwise reproducible.
    std::vector<float> again(c32.size(), -7.0f);
    if (c.out == DType::f32) {
      cpu::gemm_bf16(c.ta, c.tb, c.m, c.n, c.k, a.data.data(), lda, b.data.data(), ldb,
                     c.bias ? bias.data.data() : nullptr, again.data(), c.out, ldc);
      EXPECT_EQ(again, c32);
    }
  }
}

TEST(GemmBf16, EmptyKGivesTheBiasOrZeros) {
  if (!cpu::gemm_bf16_available())
    GTEST_SKIP() << "no oneDNN bf16 GEMM here (no oneDNN, or below AVX-512: see IsaPaths)";
  const std::vector<BFloat16> bias = {BFloat16(1.5f), BFloat16(-2.0f)};
  std::vector<float> c(4, 9.0f);
  cpu::gemm_bf16(false, false, 2, 2, 0, nullptr, 1, nullptr, 2, bias.data(), c.data(), DType::f32,
                 2);
  EXPECT_EQ(c, (std::vector<float>{1.5f, -2.0f, 1.5f, -2.0f}));
  cpu::gemm_bf16(false, false, 2, 2, 0, nullptr, 1, nullptr, 2, nullptr, c.data(), DType::f32, 2);
  EXPECT_EQ(c, std::vector<float>(4, 0.0f));
}

// The CPU backend's table uses the bf16 GEMM where Note [When oneDNN's bf16 matmul pays] says
// it pays: never without one, always on AMX, and on an Intel CPU only on AMX.
TEST(GemmBf16, TheBackendUsesItWhereItPays) {
  EXPECT_EQ(backend::host_cpu_profile().bf16_gemm, cpu::gemm_bf16_preferred());
  if (!cpu::gemm_bf16_available()) {
    EXPECT_FALSE(cpu::gemm_bf16_preferred());
    return;
  }
  // On an AMX CPU (the level in force; tests/tensor/cpu_isa_test.cpp checks it against
  // /proc/cpuinfo) oneDNN's bf16 matmul is AMX's (Note [The bf16 probe's size]), and below that
  // level it is not (oneDNN is capped with it).
  EXPECT_EQ(cpu::dnnl_bf16_matmul_on_amx(), cpu_isa() >= CpuIsa::amx) << cpu_isa_name(cpu_isa());
  if (cpu::dnnl_bf16_matmul_on_amx()) {
    EXPECT_TRUE(cpu::gemm_bf16_preferred());
  }
  if (cpu_is_intel() && !cpu::dnnl_bf16_matmul_on_amx()) {
    EXPECT_FALSE(cpu::gemm_bf16_preferred());
  }
}

// With a bf16 GEMM a bf16 linear allocates its (rows, out) result and nothing else: no f32
// copy of x, of the weight or of the output (the bound: no temporary larger than one
// tile per input). Without one, the staged GEMM adds its one bounded workspace.
TEST(GemmBf16, Bf16LinearAllocatesOnlyItsOutput) {
  const Tensor x = random_tensor({64, 128}, 4, DType::bf16);
  const Tensor w = random_tensor({256, 128}, 5, DType::bf16);
  const Tensor b = random_tensor({256}, 6, DType::bf16);
  CachingAllocator& cpu = allocator_for(Device::cpu());
  const uint64_t first = cpu.total_events();
  const Tensor y = ops::linear(x, w, b);
  const std::vector<uint64_t> allocs = requested_since(first);
  if (backend::host_cpu_profile().bf16_gemm) {
    EXPECT_EQ(allocs, (std::vector<uint64_t>{64 * 256 * 2}));
  } else {
    EXPECT_EQ(allocs, (std::vector<uint64_t>{64 * 256 * 2, uint64_t(backend::gemm_workspace_floats(
                                                               backend::host_cpu_profile(),
                                                               DType::bf16, 64, 256, 128, false)) *
                                                               4}));
  }
  EXPECT_EQ(y.dtype(), DType::bf16);
}

}  // namespace
}  // namespace fitgrad::testing
