// RoPE at packed rows' positions (tensor/ops/rope.h, RopePositions): each example of a row,
// its positions counting from 0, is rotated bit for bit as the example alone at offset 0, in
// every dtype and forward and backward; with dynamic NTK the longest example picks the base, as
// transformers takes max(position_ids) + 1; and bad positions are refused.
#include <gtest/gtest.h>

#include "tensor/ops/rope.h"
#include "tests/tensor/ops/op_harness.h"
#include "tests/tensor/packed_rows_fixture.h"

namespace fitgrad::testing {
namespace {

// Rows of (B, T) positions from example lengths, and the longest example.
ops::RopePositions positions_of(const PackedLengths& rows, int64_t t) {
  int64_t longest = 0;
  for (const auto& row : rows)
    for (const int32_t n : row) longest = std::max<int64_t>(longest, n);
  return {Tensor::from_vector(example_positions(rows), {int64_t(rows.size()), t}, DType::i32),
          longest};
}

TEST(RopePacked, EachExampleRotatesAsItsLoneRun) {
  const std::vector<std::vector<int32_t>> rows = {{4, 1, 7}, {12}, {6, 6}};
  const int64_t t = 12;
  const ops::RopePositions positions = positions_of(rows, t);
  RopeScaling llama3;
  llama3.type = RopeScaling::Type::llama3;
  llama3.factor = 8;
  llama3.low_freq_factor = 1;
  llama3.high_freq_factor = 4;
  llama3.original_max_position = 8;
  for (const RopeParams& rope : {RopeParams(1e4), RopeParams(5e5, llama3)})
    for (const DType dtype : {DType::f32, DType::bf16, DType::f16}) {
      const Tensor x = random_tensor({3, 2, t, 8}, 5, dtype);
      const Tensor y = ops::rope(x, 0, rope, positions);
      const Tensor dx = ops::rope_backward(x, 0, rope, positions);
      for (int64_t b = 0; b < 3; ++b) {
        int64_t at = 0;
        for (const int32_t n : rows[size_t(b)]) {
          const Tensor xe = x.narrow(0, b, 1).narrow(2, at, n).contiguous();
          EXPECT_EQ(to_f64(y.narrow(0, b, 1).narrow(2, at, n).contiguous()),
                    to_f64(ops::rope(xe, 0, rope)))
              << b << " " << at;
          EXPECT_EQ(to_f64(dx.narrow(0, b, 1).narrow(2, at, n).contiguous()),
                    to_f64(ops::rope_backward(xe, 0, rope)))
              << b << " " << at;
          at += n;
        }
      }
    }
}

TEST(RopePacked, DynamicNtkTakesTheLongestExample) {
  RopeScaling ntk;
  ntk.type = RopeScaling::Type::dynamic;
  ntk.factor = 2;
  ntk.original_max_position = 4;
  const RopeParams rope(1e4, ntk);
  const Tensor x = random_tensor({1, 1, 10, 4}, 6);
  // One example of 10: the base of a 10-token sequence, as when the row is not packed.
  EXPECT_EQ(to_f64(ops::rope(x, 0, rope, positions_of({{10}}, 10))), to_f64(ops::rope(x, 0, rope)));
  // Examples of 3 and 7: the first rotates as a 3-token prefix of a 7-token sequence.
  const Tensor packed = ops::rope(x, 0, rope, positions_of({{3, 7}}, 10));
  const Tensor alone7 = ops::rope(x.narrow(2, 0, 7).contiguous(), 0, rope);
  EXPECT_EQ(to_f64(packed.narrow(2, 0, 3).contiguous()),
            to_f64(alone7.narrow(2, 0, 3).contiguous()));
}

TEST(RopePacked, RefusesBadPositions) {
  const Tensor x = random_tensor({2, 1, 4, 4}, 7);
  const RopeParams rope(1e4);
  const ops::RopePositions good = positions_of({{4}, {2, 2}}, 4);
  expect_error([&] { ops::rope(x, 3, rope, good); }, "[rope]", "count from 0");
  expect_error([&] { ops::rope(x, 0, rope, {good.ids, 5}); }, "[rope]", "longest 5");
  expect_error([&] { ops::rope(x, 0, rope, {good.ids.to(DType::i64), 4}); }, "[rope]", "i32");
  expect_error(
      [&] {
        ops::rope(x, 0, rope, {good.ids.narrow(0, 0, 1).contiguous(), 4});
      },
      "[rope]", "(2, 4)");
}

}  // namespace
}  // namespace fitgrad::testing
