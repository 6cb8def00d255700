// embedding: the forward gather against an fp64 reference (exact: it copies rows), the
// backward scatter-add against finite differences of that reference, for i32/i64 ids of
// several shapes (with repeats) and f32/bf16/f16 tables (one table row each); then errors,
// bitwise reproducibility across thread counts, and meta allocation.
#include "tensor/ops/embedding.h"

#include "tensor/memory/caching_allocator.h"
#include "tests/tensor/memory/events_since.h"
#include "tests/tensor/ops/op_harness.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace fitgrad::testing {
namespace {

struct EmbeddingCase {
  const char* name;
  int64_t V, C;
  Shape ids_shape;
  std::vector<int64_t> ids;
  DType id_dtype, dtype;
};

std::vector<EmbeddingCase> embedding_cases() {
  struct Base {
    const char* name;
    int64_t V, C;
    Shape ids_shape;
    std::vector<int64_t> ids;
  };
  const Base bases[] = {
      {"batch", 7, 5, {2, 3}, {0, 6, 2, 2, 5, 0}},
      {"flat", 4, 3, {5}, {3, 3, 3, 1, 0}},
      {"deep", 6, 4, {2, 2, 2}, {5, 4, 3, 2, 1, 0, 1, 5}},
      {"scalar", 3, 70, {}, {2}},  // C > 64: two column blocks in backward
  };
  std::vector<EmbeddingCase> out;
  for (const Base& b : bases)
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      for (DType it : {DType::i32, DType::i64})
        out.push_back({b.name, b.V, b.C, b.ids_shape, b.ids, it, dt});
  return out;
}

// fp64 gather: out[i, c] = w[ids[i], c].
std::vector<double> reference(const std::vector<double>& w, const std::vector<int64_t>& ids,
                              int64_t C) {
  std::vector<double> out;
  for (int64_t id : ids)
    for (int64_t c = 0; c < C; ++c) out.push_back(w[size_t(id * C + c)]);
  return out;
}

class EmbeddingTest : public ::testing::TestWithParam<EmbeddingCase> {};

TEST_P(EmbeddingTest, ForwardMatchesFp64Reference) {
  const EmbeddingCase& c = GetParam();
  const Tensor w = random_tensor({c.V, c.C}, 50, c.dtype);
  const Tensor ids = Tensor::from_vector(c.ids, c.ids_shape, c.id_dtype);
  const Tensor y = ops::embedding(w, ids);
  Shape want_shape = c.ids_shape;
  want_shape.push_back(c.C);
  EXPECT_EQ(y.shape(), want_shape);
  EXPECT_EQ(y.dtype(), c.dtype);
  EXPECT_EQ(to_f64(y), reference(to_f64(w), c.ids, c.C));  // a gather is exact
}

TEST_P(EmbeddingTest, BackwardMatchesFiniteDifferences) {
  const EmbeddingCase& c = GetParam();
  const Tensor w = random_tensor({c.V, c.C}, 51, c.dtype);
  const Tensor ids = Tensor::from_vector(c.ids, c.ids_shape, c.id_dtype);
  Shape dy_shape = c.ids_shape;
  dy_shape.push_back(c.C);
  const Tensor dy = random_tensor(dy_shape, 52, c.dtype);
  const Tensor dw = ops::embedding_backward(dy, ids, c.V);
  EXPECT_EQ(dw.shape(), (Shape{c.V, c.C}));
  EXPECT_EQ(dw.dtype(), c.dtype);
  const std::vector<double> dyv = to_f64(dy);
  auto loss = [&](const std::vector<double>& wv) {
    const std::vector<double> y = reference(wv, c.ids, c.C);
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += dyv[i] * y[i];
    return s;
  };
  EXPECT_TRUE(close_for(c.dtype, to_f64(dw), finite_diff(loss, to_f64(w))));
}

INSTANTIATE_TEST_SUITE_P(Embedding, EmbeddingTest, ::testing::ValuesIn(embedding_cases()),
                         [](const auto& info) {
                           const EmbeddingCase& c = info.param;
                           return std::string(c.name) + "_" + std::string(dtype_name(c.dtype)) +
                                  "_" + std::string(dtype_name(c.id_dtype));
                         });

// Throws fitgrad::Error whose message starts with `prefix` and contains `part`.

TEST(EmbeddingErrors, BadIdsShapesAndDtypes) {
  const Tensor w = random_tensor({5, 3}, 53);
  const auto ids = [](std::vector<int64_t> v, DType dt = DType::i64) {
    const Shape shape{int64_t(v.size())};
    return Tensor::from_vector(v, shape, dt);
  };
  expect_error(
      [&] {
        ops::embedding(w, ids({1, 5}));
      },
      "[embedding]", "id 5 at position 1 is out of range for 5 embeddings");
  expect_error([&] { ops::embedding(w, ids({-1}, DType::i32)); }, "[embedding]", "id -1");
  expect_error([&] { ops::embedding(w, ids({0}, DType::u8)); }, "[embedding]", "i32 or i64");
  expect_error([&] { ops::embedding(w, ids({0}, DType::f32)); }, "[embedding]");
  expect_error([&] { ops::embedding(random_tensor({5}, 54), ids({0})); }, "[embedding]");
  expect_error([&] { ops::embedding(Tensor::zeros({5, 3}, DType::i32), ids({0})); }, "[embedding]");
  expect_error([&] { ops::embedding(w, ids({0}).to(Device::meta())); }, "[embedding]");
  const Tensor dy = random_tensor({2, 3}, 55);
  expect_error([&] { ops::embedding_backward(dy, ids({0, 9}), 5); }, "[embedding", "id 9");
  expect_error([&] { ops::embedding_backward(dy, ids({0, 1, 2}), 5); }, "[embedding_backward]");
  expect_error([&] { ops::embedding_backward(dy, ids({0, 1}), 0); }, "[embedding_backward]");
}

TEST(EmbeddingDeterminism, BackwardIsBitwiseTheSameForAnyThreadCount) {
#ifdef _OPENMP
  // Many repeats of few ids over 200 columns (four column blocks).
  std::vector<int64_t> v(500);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t(i * 7 % 3);
  const Tensor ids = Tensor::from_vector(v, {500}, DType::i64);
  const Tensor dy = random_tensor({500, 200}, 56);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<float> one = ops::embedding_backward(dy, ids, 3).to_vector<float>();
  omp_set_num_threads(2);
  const std::vector<float> two = ops::embedding_backward(dy, ids, 3).to_vector<float>();
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two);
#else
  GTEST_SKIP() << "built without OpenMP";
#endif
}

// Note [Low-precision embedding backward]: a bf16/f16 dw is the f32 backward on the widened
// dy, rounded once, bit for bit; it allocates dw and the (n, 2) i64 pairs, no f32 copy.
TEST(EmbeddingHalf, BackwardIsTheF32SumRoundedOnce) {
  std::vector<int64_t> v(300);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t(i * 13 % 37);  // ids 0..36 repeat
  const Tensor ids = Tensor::from_vector(v, {300}, DType::i64);
  for (DType dtype : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor dy = random_tensor({300, 150}, 57, dtype);  // three column blocks, one ragged
    CachingAllocator& cpu = allocator_for(Device::cpu());
    const uint64_t first = cpu.total_events();
    const Tensor dw = ops::embedding_backward(dy, ids, 40);  // rows 37..39 see no id
    EXPECT_EQ(requested_since(first), (std::vector<uint64_t>{40 * 150 * 2, 300 * 2 * 8}));
    EXPECT_EQ(dw.dtype(), dtype);
    const Tensor want = ops::embedding_backward(dy.to(DType::f32), ids, 40).to(dtype);
    EXPECT_TRUE(all_close(to_f64(dw), to_f64(want), 0, 0));
  }
}

TEST(EmbeddingMeta, AllocatesOutputsOnly) {
  const Device meta = Device::meta();
  const Tensor w = Tensor::empty({100, 16}, DType::bf16, meta);
  const Tensor ids = Tensor::empty({2, 9}, DType::i32, meta);
  const Tensor y = ops::embedding(w, ids);
  EXPECT_EQ(y.shape(), (Shape{2, 9, 16}));
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(y.device(), meta);
  const Tensor dw = ops::embedding_backward(y, ids, 100);
  EXPECT_EQ(dw.shape(), (Shape{100, 16}));
  EXPECT_EQ(dw.dtype(), DType::bf16);
  EXPECT_EQ(dw.device(), meta);
}

}  // namespace
}  // namespace fitgrad::testing
