// Indices out of range on a card (Note [Device error flags] in cuda/error_flags.h): the
// kernels of embedding, embedding_4bit and cross-entropy record them instead of reading the
// indices back, skip them, and check_device_errors throws at the next check, naming the op,
// the count and an example; the records then restart at zero. The CPU throws at once for the
// same inputs, which is what the first test holds; the card's test skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tensor/device_copy.h"
#include "tensor/device_registry.h"
#include "tensor/ops/cross_entropy.h"
#include "tensor/ops/embedding.h"
#include "tests/card.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

Tensor ids_of(std::vector<int64_t> v) {
  const int64_t n = int64_t(v.size());
  return Tensor::from_vector(v, {n}, DType::i64);
}

TEST(CudaErrorFlags, TheCpuThrowsAtOnceAndHasNothingToCheckLater) {
  const Tensor weight = random_tensor({5, 3}, 1);
  expect_error([&] { ops::embedding(weight, ids_of({1, 7, 2})); }, "[embedding]", "7");
  expect_error(
      [&] {
        ops::cross_entropy(random_tensor({3, 4}, 2), ids_of({0, 4, 1}));
      },
      "[cross_entropy]", "target 4 at row 1");
  check_device_errors(Device::cpu());  // nothing recorded, nothing thrown
}

TEST(CudaErrorFlags, ACardRecordsOutOfRangeIndicesAndTheCheckNamesThem) {
  FG_SKIP_WITHOUT_CARD();
  const Device cuda = Device::cuda(0);
  const Tensor weight = random_tensor({5, 3}, 1).to(cuda);
  const Tensor rows = ops::embedding(weight, ids_of({1, 7, 2}).to(cuda));   // no throw here
  EXPECT_EQ(to_f64(rows.narrow(0, 1, 1)), (std::vector<double>{0, 0, 0}));  // the skipped row
  EXPECT_EQ(to_f64(rows.narrow(0, 0, 1)), to_f64(random_tensor({5, 3}, 1).narrow(0, 1, 1)));
  expect_error([&] { check_device_errors(cuda); }, "[embedding] 1 ids out of range [0, 5)",
               "one was 7");
  check_device_errors(cuda);  // the records restarted

  const Tensor logits = random_tensor({3, 4}, 2);
  const ops::CrossEntropyOut bad = ops::cross_entropy(logits.to(cuda), ids_of({0, 9, 1}).to(cuda));
  const ops::CrossEntropyOut good = ops::cross_entropy(logits.narrow(0, 0, 1), ids_of({0}));
  EXPECT_EQ(bad.count(), 2);  // the bad row left out of the mean
  expect_error([&] { check_device_errors(cuda); }, "[cross_entropy] 1 targets out of range [0, 4)",
               "one was 9");
  EXPECT_TRUE(std::isfinite(bad.loss.item()));
  EXPECT_TRUE(std::isfinite(good.loss.item()));
}

}  // namespace
}  // namespace fitgrad::testing
