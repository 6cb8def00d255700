// The two reads of a 4-bit weight that avoid dequantizing all of it (tensor/ops/quantize.h):
// embedding_4bit against the rows of dequantize_4bit, bit for bit, and linear_4bit against
// an fp64 product with the dequantized weight, for NF4 and FP4, with and without double
// quantization, rows aligned with the blocks (the vectorised path of Note [Four-bit
// matvec]) and blocks straddling rows (its scalar path).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tensor/ops/quantize.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad {
namespace {

using testing::all_within;
using testing::expect_error;
using testing::random_tensor;
using testing::to_f64;

struct Case {
  int64_t out, in, blocksize;
  quant::FourBitType type;
  bool double_quant;
};

const Case kCases[] = {
    {37, 256, 64, quant::FourBitType::nf4, true},   // aligned, several blocks per row
    {5, 128, 128, quant::FourBitType::nf4, false},  // one block per row
    {6, 576, 64, quant::FourBitType::fp4, true},    // SmolLM2's hidden size
    {7, 100, 64, quant::FourBitType::nf4, true},    // blocks straddle rows
    {3, 33, 32, quant::FourBitType::fp4, false},    // odd row length
    {300, 64, 64, quant::FourBitType::nf4, true},   // more than 256 blocks: two absmax2
};

TEST(Quantize4bitReads, EmbeddingRowsAreTheDequantizedRowsBitForBit) {
  for (const Case& c : kCases)
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      for (DType id_type : {DType::i32, DType::i64}) {
        const Tensor w = random_tensor({c.out, c.in}, 7 + uint64_t(c.in), DType::f32, -3, 3);
        const ops::FourBit q = ops::quantize_4bit(w, {c.type, c.blocksize, c.double_quant});
        const std::vector<int64_t> rows = {c.out - 1, 0, 2 % c.out, c.out - 1, 1 % c.out, 0};
        const Tensor ids = Tensor::from_vector(rows, {2, 3}, id_type);
        const Tensor got = ops::embedding_4bit(q, ids, dt);
        ASSERT_EQ(got.shape(), (Shape{2, 3, c.in}));
        const std::vector<double> full = to_f64(ops::dequantize_4bit(q, dt));
        const std::vector<double> g = to_f64(got);
        for (size_t r = 0; r < rows.size(); ++r)
          for (int64_t k = 0; k < c.in; ++k)
            ASSERT_EQ(g[r * size_t(c.in) + size_t(k)], full[size_t(rows[r] * c.in + k)])
                << "case out " << c.out << " in " << c.in << ", row " << rows[r] << " col " << k;
      }
}

TEST(Quantize4bitReads, EmbeddingRefusesAnIdOutOfRange) {
  const ops::FourBit q = ops::quantize_4bit(random_tensor({4, 64}, 1), {});
  const Tensor bad = Tensor::from_vector(std::vector<int64_t>{1, 4}, {2}, DType::i64);
  expect_error([&] { ops::embedding_4bit(q, bad, DType::f32); }, "[embedding_4bit]", "id 4");
  const ops::FourBit flat = ops::quantize_4bit(random_tensor({64}, 1), {});
  expect_error([&] { ops::embedding_4bit(flat, bad, DType::f32); }, "[embedding_4bit]", "2-d");
}

// y = x W^T against the fp64 product with the f32-dequantized W: the kernel's f32 sums (per
// block, then over blocks) stay within a few f32 roundings of sum_k |w_k x_k|.
TEST(Quantize4bitReads, LinearMatchesTheDequantizedProductInFp64) {
  for (const Case& c : kCases)
    for (int64_t m : {1, 3})
      for (DType xt : {DType::f32, DType::bf16}) {
        const Tensor w = random_tensor({c.out, c.in}, 11 + uint64_t(c.out), DType::f32, -2, 2);
        const ops::FourBit q = ops::quantize_4bit(w, {c.type, c.blocksize, c.double_quant});
        const Tensor x = random_tensor({m, 1, c.in}, 13 + uint64_t(m), xt);
        const Tensor y = ops::linear_4bit(x, q);
        ASSERT_EQ(y.shape(), (Shape{m, 1, c.out}));
        ASSERT_EQ(y.dtype(), xt);
        const std::vector<double> wd = to_f64(ops::dequantize_4bit(q, DType::f32));
        const std::vector<double> xd = to_f64(x);
        std::vector<double> want(size_t(m * c.out)), bound(want.size());
        for (int64_t r = 0; r < m; ++r)
          for (int64_t o = 0; o < c.out; ++o) {
            double s = 0, mag = 0;
            for (int64_t k = 0; k < c.in; ++k) {
              const double p = wd[size_t(o * c.in + k)] * xd[size_t(r * c.in + k)];
              s += p;
              mag += std::fabs(p);
            }
            want[size_t(r * c.out + o)] = s;
            // f32 accumulation, plus the output's rounding to x's dtype.
            const double out_ulp = xt == DType::bf16 ? std::ldexp(1.0, -8) : 0.0;
            bound[size_t(r * c.out + o)] = 1e-6 * mag + out_ulp * std::fabs(s);
          }
        EXPECT_TRUE(all_within(to_f64(y), want, bound))
            << "case out " << c.out << " in " << c.in << " rows " << m << " x " << dtype_name(xt);
      }
}

TEST(Quantize4bitReads, LinearRefusesAMismatchedInput) {
  const ops::FourBit q = ops::quantize_4bit(random_tensor({4, 64}, 1), {});
  expect_error(
      [&] {
        ops::linear_4bit(random_tensor({2, 63}, 2), q);
      },
      "[linear_4bit]", "(..., 64)");
}

}  // namespace
}  // namespace fitgrad
