// Cross-entropy (tensor/ops/cross_entropy.h): forward against an fp64 reference and
// backward against finite differences of it, per table row (dtype, target type,
// ignore_index, chunking); chunking never changes a bit; every target ignored; the
// ledger's peak for bf16 logits stays below one f32 copy of them; meta and errors.
#include "tensor/ops/cross_entropy.h"

#include <cmath>

#include "tensor/memory/caching_allocator.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

struct CeCase {
  const char* name;
  int64_t n, v;
  DType dtype;
  DType target_dtype;
  int64_t ignore_index;
  int64_t chunk_rows;
};

std::vector<CeCase> ce_cases() {
  return {
      {"small_f32", 5, 7, DType::f32, DType::i64, -100, 0},
      {"chunked_f32", 9, 11, DType::f32, DType::i32, -100, 4},
      {"ignore_class_3", 12, 6, DType::f32, DType::i64, 3, 5},
      {"bf16", 33, 100, DType::bf16, DType::i64, -100, 7},
      {"f16", 16, 300, DType::f16, DType::i32, -100, 0},
      {"one_row_chunks_bf16", 6, 50, DType::bf16, DType::i32, -1, 1},
  };
}

// Targets in [0, v), every third row set to ignore_index.
Tensor make_targets(const CeCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> t(size_t(c.n));
  for (int64_t r = 0; r < c.n; ++r)
    t[size_t(r)] = r % 3 == 1 ? c.ignore_index : int64_t(rng() % uint64_t(c.v));
  return Tensor::from_vector(t, {c.n}, c.target_dtype);
}

struct Reference {
  double loss;
  std::vector<double> lse;
  int64_t count;
};

Reference reference(const std::vector<double>& x, const std::vector<int64_t>& t, int64_t v,
                    int64_t ignore_index) {
  const int64_t n = int64_t(t.size());
  Reference r{0, std::vector<double>(size_t(n)), 0};
  for (int64_t i = 0; i < n; ++i) {
    double mx = -INFINITY, sum = 0;
    for (int64_t c = 0; c < v; ++c) mx = std::max(mx, x[size_t(i * v + c)]);
    for (int64_t c = 0; c < v; ++c) sum += std::exp(x[size_t(i * v + c)] - mx);
    r.lse[size_t(i)] = mx + std::log(sum);
    if (t[size_t(i)] == ignore_index) continue;
    r.loss += r.lse[size_t(i)] - x[size_t(i * v + t[size_t(i)])];
    ++r.count;
  }
  r.loss = r.count ? r.loss / double(r.count) : 0.0;
  return r;
}

class CrossEntropyTest : public ::testing::TestWithParam<CeCase> {};

TEST_P(CrossEntropyTest, ForwardMatchesFp64Reference) {
  const CeCase& c = GetParam();
  const Tensor logits = random_tensor({c.n, c.v}, 1, c.dtype, -4, 4);
  const Tensor targets = make_targets(c, 2);
  const ops::CrossEntropyOut out =
      ops::cross_entropy(logits, targets, c.ignore_index, c.chunk_rows);
  const Reference want =
      reference(to_f64(logits), targets.to_vector<int64_t>(), c.v, c.ignore_index);
  EXPECT_EQ(out.count(), want.count);
  EXPECT_EQ(out.loss.shape(), Shape{});
  EXPECT_EQ(out.loss.dtype(), DType::f32);
  EXPECT_EQ(out.lse.dtype(), DType::f32);
  EXPECT_TRUE(all_close({out.loss.item()}, {want.loss}, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(to_f64(out.lse), want.lse, 1e-6, 1e-6));
}

TEST_P(CrossEntropyTest, BackwardMatchesFiniteDifferences) {
  const CeCase& c = GetParam();
  const Tensor logits = random_tensor({c.n, c.v}, 3, c.dtype, -4, 4);
  const Tensor targets = make_targets(c, 4);
  const ops::CrossEntropyOut out =
      ops::cross_entropy(logits, targets, c.ignore_index, c.chunk_rows);
  const double dloss = 0.7;
  const Tensor dlogits = ops::cross_entropy_backward(Tensor::full({}, dloss), logits, targets,
                                                     out.lse, out.stats, c.ignore_index);
  EXPECT_EQ(dlogits.dtype(), c.dtype);
  EXPECT_EQ(dlogits.shape(), logits.shape());
  const std::vector<int64_t> t = targets.to_vector<int64_t>();
  auto loss = [&](const std::vector<double>& x) {
    return dloss * reference(x, t, c.v, c.ignore_index).loss;
  };
  EXPECT_TRUE(close_for(c.dtype, to_f64(dlogits), finite_diff(loss, to_f64(logits))));
}

TEST_P(CrossEntropyTest, ChunkingChangesNoBit) {
  const CeCase& c = GetParam();
  const Tensor logits = random_tensor({c.n, c.v}, 5, c.dtype, -4, 4);
  const Tensor targets = make_targets(c, 6);
  const ops::CrossEntropyOut whole = ops::cross_entropy(logits, targets, c.ignore_index, c.n);
  for (int64_t rows : {int64_t(0), int64_t(1), int64_t(2), c.n - 1, c.n + 5}) {
    const ops::CrossEntropyOut out = ops::cross_entropy(logits, targets, c.ignore_index, rows);
    EXPECT_EQ(out.loss.to_vector<float>(), whole.loss.to_vector<float>()) << rows;
    EXPECT_EQ(out.lse.to_vector<float>(), whole.lse.to_vector<float>()) << rows;
  }
}

INSTANTIATE_TEST_SUITE_P(CrossEntropy, CrossEntropyTest, ::testing::ValuesIn(ce_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(CrossEntropy, NonContiguousLogits) {
  const Tensor wide = random_tensor({7, 10}, 7, DType::f32, -3, 3);
  const Tensor logits = wide.transpose(0, 1);  // (10, 7), column-major
  const Tensor targets =
      Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 0, 1, 2}, {10}, DType::i64);
  const ops::CrossEntropyOut out = ops::cross_entropy(logits, targets, -100, 3);
  const ops::CrossEntropyOut want = ops::cross_entropy(logits.contiguous(), targets);
  EXPECT_EQ(out.loss.item(), want.loss.item());
  const Tensor d =
      ops::cross_entropy_backward(Tensor::full({}, 1.0), logits, targets, out.lse, out.stats);
  const Tensor dw = ops::cross_entropy_backward(Tensor::full({}, 1.0), logits.contiguous(), targets,
                                                want.lse, want.stats);
  EXPECT_EQ(to_f64(d), to_f64(dw));
}

// Backward over several row chunks against the analytic fp64 gradient,
// dloss / count * (softmax - onehot), so that every chunk's rows must land at their own
// offset (in the logits read, the lse, the targets and dlogits). Ignored targets fall in
// the first and in the last chunk; the last chunk is a short remainder.
struct CeChunkCase {
  std::string name;
  int64_t n, v;
  DType dtype;
  int64_t chunk_rows;  // 0: the default, 256 rows for V = 4096
  bool overwrite_logits;
};

std::vector<CeChunkCase> ce_chunk_cases() {
  std::vector<CeChunkCase> cases;
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    const std::string d(dtype_name(dt));
    cases.push_back({"default_chunks_" + d, 300, 4096, dt, 0, false});
    cases.push_back({"odd_chunks_" + d, 37, 50, dt, 8, false});
  }
  cases.push_back({"default_chunks_f32_in_place", 300, 4096, DType::f32, 0, true});
  cases.push_back({"odd_chunks_f32_in_place", 37, 50, DType::f32, 8, true});
  return cases;
}

class CrossEntropyChunkedBackward : public ::testing::TestWithParam<CeChunkCase> {};

TEST_P(CrossEntropyChunkedBackward, MatchesFp64SoftmaxMinusOneHot) {
  const CeChunkCase& c = GetParam();
  const int64_t rows = c.chunk_rows > 0 ? c.chunk_rows : ops::cross_entropy_default_chunk_rows(c.v);
  ASSERT_LT(rows, c.n);      // more than one chunk
  ASSERT_NE(c.n % rows, 0);  // and a remainder
  const Tensor logits = random_tensor({c.n, c.v}, 11, c.dtype, -6, 6);
  const std::vector<double> x = to_f64(logits);
  std::mt19937_64 rng(12);
  std::vector<int64_t> t(size_t(c.n));
  for (int64_t r = 0; r < c.n; ++r) t[size_t(r)] = int64_t(rng() % uint64_t(c.v));
  for (int64_t r : {int64_t(1), rows - 1, c.n - 2}) t[size_t(r)] = -100;
  const Tensor targets = Tensor::from_vector(t, {c.n}, DType::i64);
  const ops::CrossEntropyOut out = ops::cross_entropy(logits, targets, -100, c.chunk_rows);
  ASSERT_EQ(out.count(), c.n - 3);

  const double dloss = 1.3;
  const double g = dloss / double(out.count());
  std::vector<double> want(x.size(), 0.0);
  for (int64_t i = 0; i < c.n; ++i) {
    if (t[size_t(i)] == -100) continue;
    const double* row = x.data() + i * c.v;
    const double mx = *std::max_element(row, row + c.v);
    double sum = 0;
    for (int64_t j = 0; j < c.v; ++j) sum += std::exp(row[j] - mx);
    for (int64_t j = 0; j < c.v; ++j)
      want[size_t(i * c.v + j)] = g * (std::exp(row[j] - mx) / sum - (j == t[size_t(i)] ? 1 : 0));
  }
  // The in-place path writes over its own copy, so the checked logits stay intact.
  const Tensor src = c.overwrite_logits ? logits.clone() : logits;
  const Tensor dlogits =
      ops::cross_entropy_backward(Tensor::full({}, dloss), src, targets, out.lse, out.stats, -100,
                                  c.overwrite_logits, c.chunk_rows);
  EXPECT_EQ(dlogits.dtype(), c.dtype);
  if (c.overwrite_logits) {
    EXPECT_EQ(dlogits.data<float>(), src.data<float>());
  }
  EXPECT_TRUE(close_for(c.dtype, to_f64(dlogits), want));
}

INSTANTIATE_TEST_SUITE_P(CrossEntropy, CrossEntropyChunkedBackward,
                         ::testing::ValuesIn(ce_chunk_cases()),
                         [](const auto& info) { return info.param.name; });

// Note [Cross-entropy with every target ignored] in tensor/ops/cross_entropy.cpp.
TEST(CrossEntropy, EveryTargetIgnoredGivesZeroLossAndGradient) {
  const Tensor logits = random_tensor({4, 5}, 8, DType::bf16);
  const Tensor targets = Tensor::full({4}, -100, DType::i64);
  const ops::CrossEntropyOut out = ops::cross_entropy(logits, targets);
  EXPECT_EQ(out.count(), 0);
  EXPECT_EQ(out.loss.item(), 0.0);
  const Tensor d =
      ops::cross_entropy_backward(Tensor::full({}, 1.0), logits, targets, out.lse, out.stats);
  EXPECT_EQ(to_f64(d), std::vector<double>(20, 0.0));
}

// Note [Cross-entropy chunking]: contiguous bf16 logits take no f32 scratch at all; strided
// ones take one chunk of it, never N x V.
TEST(CrossEntropyMemory, Bf16PeakStaysBelowOneF32CopyOfTheLogits) {
  const int64_t n = 512, v = 8192;
  const Tensor wide = random_tensor({n, 2 * v}, 9, DType::bf16, -4, 4);
  const Tensor strided = wide.narrow(1, v, v);  // (n, v), staged
  const Tensor logits = strided.contiguous();   // (n, v), read in place
  std::vector<int64_t> t(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) t[size_t(r)] = (r * 131) % v;
  const Tensor targets = Tensor::from_vector(t, {n}, DType::i64);
  CachingAllocator& alloc = allocator_for(Device::cpu());
  auto allocated = [&] { return alloc.stats().allocated_bytes[kAllPools]; };
  const int64_t rows = ops::cross_entropy_default_chunk_rows(v);
  EXPECT_EQ(rows, 128);  // 4 MiB of f32 scratch
  auto b = [](int64_t nbytes) { return int64_t(round_request(size_t(nbytes))); };
  const Tensor dloss = Tensor::full({}, 1.0);

  for (bool staged : {false, true}) {
    SCOPED_TRACE(staged ? "strided" : "contiguous");
    const Tensor& x = staged ? strided : logits;
    const int64_t scratch = staged ? b(rows * v * 4) : 0;
    alloc.empty_cache();  // the 4 MiB scratch then splits a fresh segment exactly
    int64_t base = allocated().current;
    alloc.reset_peak_stats();
    const ops::CrossEntropyOut out = ops::cross_entropy(x, targets);
    // loss () + lse (N) + the NLL's double accumulator (+ scratch (rows, V) when staged);
    // i64 targets are used as they are.
    EXPECT_EQ(allocated().peak - base, b(4) + b(n * 4) + scratch + b(8));
    EXPECT_LT(allocated().peak - base, n * v * 4);

    alloc.empty_cache();
    base = allocated().current;
    alloc.reset_peak_stats();
    const Tensor d = ops::cross_entropy_backward(dloss, x, targets, out.lse, out.stats);
    // dlogits (N, V) bf16 (+ scratch (rows, V) f32 when staged), against N*V*(2 + 4)
    // converting it all.
    EXPECT_EQ(allocated().peak - base, b(n * v * 2) + scratch);
    EXPECT_LT(allocated().peak - base, n * v * 2 + n * v * 4);
  }
}

TEST(CrossEntropyMeta, AllocatesOutputsOnly) {
  const Tensor logits = Tensor::empty({6, 11}, DType::bf16, Device::meta());
  const Tensor targets = Tensor::empty({6}, DType::i32, Device::meta());
  const ops::CrossEntropyOut out = ops::cross_entropy(logits, targets);
  EXPECT_EQ(out.count(), 6);
  EXPECT_EQ(out.loss.device(), Device::meta());
  EXPECT_EQ(out.lse.shape(), Shape{6});
  const Tensor d = ops::cross_entropy_backward(Tensor::empty({}, DType::f32, Device::meta()),
                                               logits, targets, out.lse, out.stats);
  EXPECT_EQ(d.shape(), logits.shape());
  EXPECT_EQ(d.dtype(), DType::bf16);
}

// Throws fitgrad::Error whose message starts with `prefix` and contains `part`.

TEST(CrossEntropyErrors, BadTargetsAndShapes) {
  const Tensor logits = random_tensor({3, 5}, 10);
  auto targets = [](std::vector<int64_t> t, DType dt = DType::i64) {
    return Tensor::from_vector(t, {int64_t(t.size())}, dt);
  };
  const std::string f = "[cross_entropy]";
  expect_error([&] { ops::cross_entropy(logits, targets({0, 1, 5})); }, f, "target 5 at row 2");
  expect_error(
      [&] {
        ops::cross_entropy(logits, targets({-1, 1, 2}, DType::i32));
      },
      f, "target -1 at row 0");
  expect_error([&] { ops::cross_entropy(logits, targets({0, 1})); }, f);
  expect_error([&] { ops::cross_entropy(logits, targets({0, 1, 2}, DType::f32)); }, f);
  expect_error([&] { ops::cross_entropy(logits.flatten(), targets({0, 1, 2})); }, f);
  expect_error(
      [&] {
        ops::cross_entropy(Tensor::zeros({3, 5}, DType::i64), targets({0, 1, 2}));
      },
      f);
  expect_error([&] { ops::cross_entropy(logits, targets({0, 1, 2}), -100, -1); }, f);
  const ops::CrossEntropyOut out = ops::cross_entropy(logits, targets({0, 1, 2}));
  const Tensor one = Tensor::full({}, 1.0);
  const std::string b = "[cross_entropy_backward]";
  expect_error(
      [&] {
        ops::cross_entropy_backward(one, logits, targets({0, 9, 2}), out.lse, out.stats);
      },
      b, "target 9 at row 1");
  expect_error(
      [&] {
        ops::cross_entropy_backward(Tensor::full({1}, 1.0), logits, targets({0, 1, 2}), out.lse,
                                    out.stats);
      },
      b);
  expect_error(
      [&] {
        ops::cross_entropy_backward(one, logits, targets({0, 1, 2}), logits, out.stats);
      },
      b);
  expect_error(
      [&] {
        ops::cross_entropy_backward(one, logits, targets({0, 1, 2}), out.lse, out.lse);
      },
      b, "stats");
  expect_error(
      [&] {
        ops::cross_entropy_backward(Tensor::full({}, 1.0, DType::bf16), logits, targets({0, 1, 2}),
                                    out.lse, out.stats);
      },
      b, "dloss");
}

}  // namespace
}  // namespace fitgrad::testing
