// Cross-entropy on bf16 logits read in place (Note [Cross-entropy on bf16 rows] in
// tensor/cpu/cross_entropy.cpp) against the staged paths on the same values: a strided view
// of the logits, which the front-end stages chunk by chunk into f32, and their f32 widening,
// which the f32 kernels read in place, its gradient then rounded once. Loss, lse and the
// gradient agree bit for bit at the ISA level in force (tests/CMakeLists.txt reruns the
// CrossEntropy suites at every level). Row widths cover a partial vector only, whole
// vectors, vectors and a tail, and GPT-2's vocabulary (parallel rows); targets fall on the
// first column, the last (in the tail), the middle, and are ignored.
#include <cstring>

#include "tensor/ops/cross_entropy.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

struct Bf16Case {
  const char* name;
  int64_t n, v, chunk_rows;
};

// The raw bits of t's elements, row-major: T is uint16_t for bf16, uint32_t for f32.
template <class T>
std::vector<T> bits(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<T> out(size_t(c.numel()));
  std::memcpy(out.data(), c.data_ptr(), out.size() * sizeof(T));
  return out;
}

class CrossEntropyBf16InPlace : public ::testing::TestWithParam<Bf16Case> {};

TEST_P(CrossEntropyBf16InPlace, MatchesStagedPathsBitForBit) {
  const Bf16Case& c = GetParam();
  const Tensor wide = random_tensor({c.n, 2 * c.v}, 21, DType::bf16, -8, 8);
  const Tensor strided = wide.narrow(1, 0, c.v);  // (n, v), staged
  ASSERT_FALSE(strided.is_contiguous());
  const Tensor logits = strided.contiguous();  // (n, v), read in place
  const Tensor widened = logits.to(DType::f32);
  std::mt19937_64 rng(22);
  std::vector<int64_t> t(size_t(c.n));
  for (int64_t r = 0; r < c.n; ++r) {
    const int64_t pick[] = {0, c.v - 1, -100, c.v / 2, int64_t(rng() % uint64_t(c.v))};
    t[size_t(r)] = pick[r % 5];
  }
  const Tensor targets = Tensor::from_vector(t, {c.n}, DType::i64);

  const ops::CrossEntropyOut out = ops::cross_entropy(logits, targets, -100, c.chunk_rows);
  const ops::CrossEntropyOut staged = ops::cross_entropy(strided, targets, -100, c.chunk_rows);
  const ops::CrossEntropyOut f32 = ops::cross_entropy(widened, targets, -100, c.chunk_rows);
  for (const ops::CrossEntropyOut* want : {&staged, &f32}) {
    EXPECT_EQ(bits<uint32_t>(out.loss), bits<uint32_t>(want->loss));
    EXPECT_EQ(bits<uint32_t>(out.lse), bits<uint32_t>(want->lse));
  }

  const Tensor dloss = Tensor::full({}, 1.3);
  const Tensor d = ops::cross_entropy_backward(dloss, logits, targets, out.lse, out.stats, -100,
                                               false, c.chunk_rows);
  const Tensor d_staged = ops::cross_entropy_backward(dloss, strided, targets, staged.lse,
                                                      staged.stats, -100, false, c.chunk_rows);
  const Tensor d_f32 = ops::cross_entropy_backward(dloss, widened, targets, f32.lse, f32.stats,
                                                   -100, false, c.chunk_rows);
  ASSERT_EQ(d.dtype(), DType::bf16);
  EXPECT_EQ(bits<uint16_t>(d), bits<uint16_t>(d_staged));
  EXPECT_EQ(bits<uint16_t>(d), bits<uint16_t>(d_f32.to(DType::bf16)));
}

INSTANTIATE_TEST_SUITE_P(CrossEntropy, CrossEntropyBf16InPlace,
                         ::testing::Values(Bf16Case{"partial_vector", 9, 5, 0},
                                           Bf16Case{"one_vector", 6, 16, 4},
                                           Bf16Case{"vectors_and_tail", 11, 37, 3},
                                           Bf16Case{"wide", 40, 1000, 0},
                                           Bf16Case{"gpt2_vocab", 7, 50257, 3}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace fitgrad::testing
