// The reduction ops (tensor/ops/reduce.h), table-driven over shapes, dims, keepdim, layouts
// and f32/bf16/f16: sum, mean, max and sum_to against fp64 loops written here; the backward
// of sum and mean (composed as autograd will) and max_backward against central finite
// differences of sum(w * f) on the fp64 reference; and the bitwise reproducibility of
// large sums, for one thread count and across thread counts.
#include "tensor/ops/reduce.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor/memory/caching_allocator.h"
#include "tests/tensor/memory/events_since.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

enum class Layout { contiguous, transposed, strided };

// `values` (row-major over `shape`) stored as `dtype` and viewed through `layout`:
// transposed stores the last two dims swapped, strided interleaves unused elements in the
// last dim.
Tensor lay_out(const std::vector<double>& values, const Shape& shape, DType dtype, Layout layout) {
  const size_t n = shape.size();
  if (layout == Layout::transposed && n >= 2) {
    Shape storage = shape;
    std::swap(storage[n - 1], storage[n - 2]);
    Tensor t = Tensor::empty(storage, dtype).transpose(-1, -2);
    t.copy_(Tensor::from_vector(values, shape, dtype));
    return t;
  }
  if (layout == Layout::strided && n >= 1) {
    Shape storage = shape;
    storage[n - 1] *= 2;
    Tensor t = Tensor::full(storage, 1e9, dtype).slice(-1, 0, storage[n - 1], 2);
    t.copy_(Tensor::from_vector(values, shape, dtype));
    return t;
  }
  return Tensor::from_vector(values, shape, dtype);
}

std::vector<double> uniform(int64_t n, uint64_t seed) {
  return to_f64(random_tensor({n}, seed, DType::f32));
}

// Distinct values exact in every dtype (k / 8 for a permutation k of -n/2..n/2), so the
// maximum is unique and finite differences do not cross a tie.
std::vector<double> distinct(int64_t n, uint64_t seed) {
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), -double(n / 2));
  std::shuffle(v.begin(), v.end(), std::mt19937_64(seed));
  for (double& x : v) x /= 8;
  return v;
}

// Maps each input flat index to its output flat index when `reduced` dims are dropped.
std::vector<int64_t> output_index(const Shape& shape, const std::vector<bool>& reduced) {
  std::vector<int64_t> out(size_t(numel(shape)));
  for (int64_t i = 0; i < numel(shape); ++i) {
    int64_t rest = i, o = 0, stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      const int64_t coord = rest % shape[d];
      rest /= shape[d];
      if (!reduced[d]) {
        o += coord * stride;
        stride *= shape[d];
      }
    }
    out[size_t(i)] = o;
  }
  return out;
}

std::vector<bool> reduced_mask(size_t ndim, const std::vector<int64_t>& dims) {
  std::vector<bool> r(ndim, dims.empty());
  for (int64_t d : dims) r[size_t(d < 0 ? d + int64_t(ndim) : d)] = true;
  return r;
}

Shape out_shape(const Shape& shape, const std::vector<bool>& reduced, bool keepdim) {
  Shape s;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!reduced[d])
      s.push_back(shape[d]);
    else if (keepdim)
      s.push_back(1);
  return s;
}

// fp64 sum (or mean) over the reduced dims.
std::vector<double> sum_ref(const std::vector<double>& x, const Shape& shape,
                            const std::vector<bool>& reduced, bool mean) {
  const std::vector<int64_t> oi = output_index(shape, reduced);
  const Shape out = out_shape(shape, reduced, false);
  std::vector<double> s(size_t(numel(out)), 0.0);
  for (size_t i = 0; i < x.size(); ++i) s[size_t(oi[i])] += x[i];
  if (mean) {
    const double count = double(x.size()) / double(s.size());
    for (double& v : s) v /= count;
  }
  return s;
}

const DType kDTypes[] = {DType::f32, DType::bf16, DType::f16};

std::string label(const char* op, const Shape& shape, const std::vector<int64_t>& dims,
                  bool keepdim, DType dtype) {
  return std::string(op) + " " + shape_str(shape) + " dims " + shape_str(dims) +
         (keepdim ? " keepdim " : " ") + std::string(dtype_name(dtype));
}

struct SumRow {
  Shape shape;
  std::vector<int64_t> dims;
  bool keepdim;
  Layout layout;
};

const SumRow kSumRows[] = {
    {{3, 4, 5}, {1}, false, Layout::contiguous},
    {{3, 4, 5}, {0, 2}, true, Layout::transposed},
    {{3, 4, 5}, {}, false, Layout::strided},
    {{3, 4, 5}, {-1}, false, Layout::transposed},
    {{2, 3, 4, 5}, {0, 3}, false, Layout::strided},
    {{2, 3, 4, 5}, {-3, 2}, true, Layout::contiguous},
    {{6}, {0}, true, Layout::strided},
    {{}, {}, false, Layout::contiguous},
    {{1, 5}, {0}, false, Layout::transposed},
};

TEST(ReduceSum, SumAndMeanMatchFp64AndTheirBackwardFiniteDifferences) {
  uint64_t seed = 1;
  for (const bool mean : {false, true})
    for (const SumRow& row : kSumRows)
      for (DType dtype : kDTypes) {
        SCOPED_TRACE(label(mean ? "mean" : "sum", row.shape, row.dims, row.keepdim, dtype));
        const std::vector<bool> reduced = reduced_mask(row.shape.size(), row.dims);
        const Tensor x = lay_out(uniform(numel(row.shape), seed++), row.shape, dtype, row.layout);
        const Tensor y =
            mean ? ops::mean(x, row.dims, row.keepdim) : ops::sum(x, row.dims, row.keepdim);
        const Shape oshape = out_shape(row.shape, reduced, row.keepdim);
        ASSERT_EQ(y.shape(), oshape);
        ASSERT_EQ(y.dtype(), dtype);
        const std::vector<double> xv = to_f64(x);
        EXPECT_TRUE(close_for(dtype, to_f64(y), sum_ref(xv, row.shape, reduced, mean)));

        // Backward as autograd composes it: w broadcast back over the reduced dims.
        const Tensor w = random_tensor(oshape, seed++, dtype);
        const Tensor dx =
            w.reshape(out_shape(row.shape, reduced, true)).expand(row.shape).contiguous();
        const std::vector<double> wv = to_f64(w);
        const auto f = [&](const std::vector<double>& v) {
          const std::vector<double> s = sum_ref(v, row.shape, reduced, mean);
          double total = 0;
          for (size_t i = 0; i < s.size(); ++i) total += wv[i] * s[i];
          return total;
        };
        std::vector<double> got = to_f64(dx);
        if (mean)
          for (double& g : got) g *= double(numel(oshape)) / double(numel(row.shape));
        EXPECT_TRUE(all_close(got, finite_diff(f, xv), 1e-6, 1e-7)) << "backward";
      }
}

TEST(ReduceSum, EmptyReductionsGiveZeroAndNaN) {
  const Tensor x = Tensor::zeros({2, 0, 3});
  const Tensor s = ops::sum(x, {1});
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  for (float v : s.to_vector<float>()) EXPECT_EQ(v, 0.0f);
  for (float v : ops::mean(x, {1}).to_vector<float>()) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(ops::sum(x, {0}, true).shape(), (Shape{1, 0, 3}));
}

// Sums over several blocks (row sums, the full sum) and strided column sums are as
// accurate as double accumulation promises.
TEST(ReduceSum, LongSumsAreCorrectlyRounded) {
  const std::vector<double> v = uniform(3 * 20000, 42);
  const Tensor x = Tensor::from_vector(v, {3, 20000}, DType::f32);
  const std::vector<bool> rows = {false, true};
  const std::vector<double> want = sum_ref(to_f64(x), {3, 20000}, rows, false);
  EXPECT_TRUE(all_close(to_f64(ops::sum(x, {1})), want, 1e-7, 1e-6));
  const std::vector<double> cols = sum_ref(to_f64(x), {3, 20000}, {true, false}, false);
  EXPECT_TRUE(all_close(to_f64(ops::sum(x, {0})), cols, 1e-7, 1e-7));
  double total = 0;
  for (double d : to_f64(x)) total += d;
  EXPECT_NEAR(ops::sum(x, {}).item(), total, 1e-6 * std::fabs(total) + 1e-5);
}

// Note [Sum accumulation order]: the same bits on every run and for every thread count.
TEST(ReduceSum, LargeSumsAreBitwiseReproducible) {
  const Tensor x = random_tensor({1 << 22}, 7, DType::f32, -1, 1);
  const Tensor m = x.view({2048, 2048});
  auto bits = [](const Tensor& t) {
    const std::vector<float> v = t.to_vector<float>();
    std::vector<uint32_t> b(v.size());
    std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
    return b;
  };
  const auto full = bits(ops::sum(x, {}));
  const auto rows = bits(ops::sum(m, {1}));
  const auto cols = bits(ops::mean(m.transpose(0, 1), {1}));
  EXPECT_EQ(bits(ops::sum(x, {})), full);
  EXPECT_EQ(bits(ops::sum(m, {1})), rows);
  EXPECT_EQ(bits(ops::mean(m.transpose(0, 1), {1})), cols);
#ifdef _OPENMP
  const int threads = omp_get_max_threads();
  omp_set_num_threads(threads == 1 ? 3 : 1);
  EXPECT_EQ(bits(ops::sum(x, {})), full);
  EXPECT_EQ(bits(ops::sum(m, {1})), rows);
  EXPECT_EQ(bits(ops::mean(m.transpose(0, 1), {1})), cols);
  omp_set_num_threads(threads);
#endif
}

// bf16/f16 inputs are read as they are (no f32 copy): a sum or mean is the double sum of
// the widened values, rounded once to f32 and then to the dtype, so it equals the f32 route
// on widened inputs bit for bit; the only allocations are the output and, for a long sum
// with few outputs, the partial-sum workspace (Note [Double workspaces] in tensor/ops/op_util.h).
TEST(ReduceSum, LowPrecisionInputsAreReadInTheirDtype) {
  for (DType dtype : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = random_tensor({3, 40000}, 11, dtype, -1, 1);
    const Tensor x32 = x.to(DType::f32);
    const auto bits = [](const Tensor& t) { return to_f64(t); };
    CachingAllocator& cpu = allocator_for(Device::cpu());
    for (const std::vector<int64_t>& dims :
         {std::vector<int64_t>{1}, std::vector<int64_t>{0}, std::vector<int64_t>{}}) {
      const uint64_t first = cpu.total_events();
      const Tensor got = ops::sum(x, dims);
      const std::vector<uint64_t> allocs = requested_since(first);
      ASSERT_FALSE(allocs.empty());
      EXPECT_EQ(allocs[0], uint64_t(got.numel()) * 2) << "the output, in the dtype";
      for (size_t i = 1; i < allocs.size(); ++i)
        EXPECT_LE(allocs[i], uint64_t(x.numel()) * 2) << "no f32 copy of the input";
      EXPECT_EQ(got.dtype(), dtype);
      EXPECT_EQ(bits(got), bits(ops::sum(x32, dims).to(dtype)));
      EXPECT_EQ(bits(ops::mean(x, dims)), bits(ops::mean(x32, dims).to(dtype)));
    }
    const ops::MaxOut m = ops::max(x, 1);
    const ops::MaxOut m32 = ops::max(x32, 1);
    EXPECT_EQ(m.values.dtype(), dtype);
    EXPECT_EQ(bits(m.values), bits(m32.values));
    EXPECT_EQ(m.indices.to_vector<int64_t>(), m32.indices.to_vector<int64_t>());
    const Tensor dy = random_tensor({3}, 12, dtype);
    const Tensor dx = ops::max_backward(dy, m.indices, x.shape(), 1, false);
    EXPECT_EQ(dx.dtype(), dtype);
    EXPECT_EQ(bits(dx), bits(ops::max_backward(dy.to(DType::f32), m.indices, x.shape(), 1, false)));
  }
}

// ---- max ----

struct MaxRow {
  Shape shape;
  int64_t dim;
  bool keepdim;
  Layout layout;
};

const MaxRow kMaxRows[] = {{{3, 4, 5}, 1, false, Layout::contiguous},
                           {{3, 4, 5}, -1, true, Layout::transposed},
                           {{4, 6}, 0, false, Layout::strided},
                           {{7}, 0, true, Layout::contiguous},
                           {{2, 1, 3}, 1, false, Layout::transposed}};

TEST(ReduceMax, ValuesIndicesAndBackwardMatchFp64) {
  uint64_t seed = 300;
  for (const MaxRow& row : kMaxRows)
    for (DType dtype : kDTypes) {
      SCOPED_TRACE(label("max", row.shape, {row.dim}, row.keepdim, dtype));
      const int64_t d = row.dim < 0 ? row.dim + int64_t(row.shape.size()) : row.dim;
      std::vector<bool> reduced(row.shape.size(), false);
      reduced[size_t(d)] = true;
      const std::vector<double> xv = distinct(numel(row.shape), seed++);
      const Tensor x = lay_out(xv, row.shape, dtype, row.layout);
      const ops::MaxOut out = ops::max(x, row.dim, row.keepdim);
      const Shape oshape = out_shape(row.shape, reduced, row.keepdim);
      ASSERT_EQ(out.values.shape(), oshape);
      ASSERT_EQ(out.indices.shape(), oshape);
      ASSERT_EQ(out.values.dtype(), dtype);
      ASSERT_EQ(out.indices.dtype(), DType::i64);

      // Reference: scan in index order along d.
      const std::vector<int64_t> oi = output_index(row.shape, reduced);
      const int64_t inner = numel(Shape(row.shape.begin() + d + 1, row.shape.end()));
      auto max_ref = [&](const std::vector<double>& v, std::vector<int64_t>* at) {
        std::vector<double> best(size_t(numel(oshape)), -INFINITY);
        if (at) at->assign(best.size(), -1);
        for (size_t i = 0; i < v.size(); ++i) {
          const size_t o = size_t(oi[i]);
          if (v[i] > best[o]) {
            best[o] = v[i];
            if (at) (*at)[o] = (int64_t(i) / inner) % row.shape[size_t(d)];
          }
        }
        return best;
      };
      std::vector<int64_t> want_at;
      EXPECT_EQ(to_f64(out.values), max_ref(xv, &want_at));
      EXPECT_EQ(out.indices.to_vector<int64_t>(), want_at);

      const Tensor w = random_tensor(oshape, seed++, dtype);
      const std::vector<double> wv = to_f64(w);
      const Tensor dx = ops::max_backward(w, out.indices, row.shape, row.dim, row.keepdim);
      ASSERT_EQ(dx.shape(), row.shape);
      ASSERT_EQ(dx.dtype(), dtype);
      const auto f = [&](const std::vector<double>& v) {
        const std::vector<double> m = max_ref(v, nullptr);
        double s = 0;
        for (size_t i = 0; i < m.size(); ++i) s += wv[i] * m[i];
        return s;
      };
      EXPECT_TRUE(all_close(to_f64(dx), finite_diff(f, xv), 1e-6, 1e-7)) << "backward";
    }
}

TEST(ReduceMax, FirstMaximumWinsAndNaNPropagates) {
  const Tensor x = Tensor::from_vector(
      std::vector<float>{2, 5, 5, 1, 1, NAN, 3, NAN, -INFINITY, -INFINITY, -INFINITY, -INFINITY},
      {3, 4});
  const ops::MaxOut out = ops::max(x, 1);
  const std::vector<float> v = out.values.to_vector<float>();
  EXPECT_EQ(v[0], 5.0f);
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(v[2], -INFINITY);
  EXPECT_EQ(out.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 0}));
}

// ---- sum_to ----

TEST(ReduceSumTo, SumsTheBroadcastDims) {
  struct Row {
    Shape from, to;
  };
  const Row rows[] = {{{2, 3, 4}, {3, 1}},
                      {{2, 3, 4}, {4}},
                      {{2, 3, 4}, {}},
                      {{5, 1, 4}, {1, 1, 4}},
                      {{2, 3}, {1, 2, 3}}};
  uint64_t seed = 700;
  for (const Row& r : rows)
    for (DType dtype : kDTypes) {
      SCOPED_TRACE(shape_str(r.from) + " -> " + shape_str(r.to) + " " +
                   std::string(dtype_name(dtype)));
      if (r.to.size() > r.from.size()) {
        EXPECT_THROW(ops::sum_to(random_tensor(r.from, seed++, dtype), r.to), Error);
        continue;
      }
      const Tensor g = lay_out(uniform(numel(r.from), seed++), r.from, dtype, Layout::transposed);
      const Tensor s = ops::sum_to(g, r.to);
      ASSERT_EQ(s.shape(), r.to);
      ASSERT_EQ(s.dtype(), dtype);
      const std::vector<double> gv = to_f64(g);
      std::vector<double> want(size_t(numel(r.to)), 0.0);
      const size_t lead = r.from.size() - r.to.size();
      for (int64_t i = 0; i < numel(r.from); ++i) {
        int64_t rest = i, o = 0, stride = 1;
        for (size_t d = r.from.size(); d-- > 0;) {
          const int64_t coord = rest % r.from[d];
          rest /= r.from[d];
          if (d >= lead && r.to[d - lead] != 1) o += coord * stride;
          if (d >= lead) stride *= r.to[d - lead];
        }
        want[size_t(o)] += gv[size_t(i)];
      }
      EXPECT_TRUE(close_for(dtype, to_f64(s), want));
    }
  const Tensor g = Tensor::zeros({2, 3});
  EXPECT_TRUE(ops::sum_to(g, {2, 3}).shares_storage_with(g));
}

// ---- errors and meta ----

TEST(ReduceErrors, NameTheOpAndTheProblem) {
  const Tensor a = Tensor::zeros({2, 3});
  expect_error([&] { ops::sum(a, {1, -1}); }, "[sum] dim 1 appears more than once");
  expect_error([&] { ops::sum(a, {2}); }, "[sum] dim 2 is out of range");
  expect_error([&] { ops::mean(Tensor::zeros({2}, DType::i32), {}); }, "[mean] a must be");
  expect_error([&] { ops::max(Tensor::zeros({2, 0}), 1); }, "[max] dim 1 of shape (2, 0) is empty");
  expect_error([&] { ops::max(a, -3); }, "[max] dim -3 is out of range");
  const ops::MaxOut m = ops::max(a, 1);
  expect_error(
      [&] {
        ops::max_backward(Tensor::zeros({3}), m.indices, {2, 3}, 1, false);
      },
      "[max_backward] dy has shape (3), expected (2)");
  expect_error(
      [&] {
        ops::max_backward(m.values, m.values, {2, 3}, 1, false);
      },
      "[max_backward] indices must be i64");
  expect_error(
      [&] {
        ops::max_backward(m.values, Tensor::full({2}, 3, DType::i64), {2, 3}, 1, false);
      },
      "[max_backward] index 3");
  expect_error([&] { ops::sum_to(a, {4}); }, "[sum_to]");
  expect_error([&] { ops::sum_to(a, {3, 3}); }, "[sum_to]");
  expect_error([&] { ops::sum_to(a, {1, 2, 3}); }, "[sum_to] shape (1, 2, 3) does not broadcast");
}

TEST(ReduceMeta, AllocatesTheOutputsWithoutComputing) {
  const Device meta = Device::meta();
  const Tensor x = Tensor::empty({2, 3, 4}, DType::bf16, meta);
  const Tensor s = ops::sum(x.transpose(0, 2), {1}, true);
  EXPECT_EQ(s.shape(), (Shape{4, 1, 2}));
  EXPECT_EQ(s.dtype(), DType::bf16);
  EXPECT_EQ(s.device(), meta);
  EXPECT_EQ(ops::mean(x, {}).shape(), Shape{});
  const ops::MaxOut m = ops::max(x, -1);
  EXPECT_EQ(m.values.shape(), (Shape{2, 3}));
  EXPECT_EQ(m.indices.dtype(), DType::i64);
  EXPECT_EQ(m.indices.device(), meta);
  const Tensor dx = ops::max_backward(m.values, m.indices, {2, 3, 4}, -1, false);
  EXPECT_EQ(dx.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(dx.device(), meta);
  EXPECT_EQ(ops::sum_to(x, {3, 1}).shape(), (Shape{3, 1}));
}

}  // namespace
}  // namespace fitgrad::testing
