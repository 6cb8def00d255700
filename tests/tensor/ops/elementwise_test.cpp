// The elementwise arithmetic ops (tensor/ops/elementwise.h), table-driven: every op row runs
// over every shape row (broadcasting, transposed and strided views, 0-d, empty) in f32,
// bf16 and f16. Forward is checked against fp64 loops written here; the backward that
// autograd will compose from these ops and sum_to is checked against central finite
// differences of sum(w * f) on that fp64 reference.
#include "tensor/ops/elementwise.h"

#include <functional>
#include <string>

#include "tensor/ops/reduce.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

enum class Layout { contiguous, transposed, strided };

// A random tensor of `shape` in [lo, hi) stored as `dtype`, viewed through `layout`:
// transposed stores the last two dims swapped, strided takes every other element of the
// last dim of a wider tensor.
Tensor make_input(const Shape& shape, uint64_t seed, DType dtype, Layout layout, double lo = -1,
                  double hi = 1) {
  Shape storage = shape;
  const size_t n = shape.size();
  if (layout == Layout::transposed && n >= 2) {
    std::swap(storage[n - 1], storage[n - 2]);
    return random_tensor(storage, seed, dtype, lo, hi).transpose(-1, -2);
  }
  if (layout == Layout::strided && n >= 1) {
    storage[n - 1] *= 2;
    return random_tensor(storage, seed, dtype, lo, hi).slice(-1, 0, storage[n - 1], 2);
  }
  return random_tensor(shape, seed, dtype, lo, hi);
}

// The row-major flat index into `in` (which broadcasts to `out`) of out's flat index i.
int64_t broadcast_index(const Shape& out, const Shape& in, int64_t i) {
  int64_t index = 0, stride = 1;
  for (size_t k = 0; k < out.size(); ++k) {
    const size_t d = out.size() - 1 - k;
    const int64_t coord = i % out[d];
    i /= out[d];
    if (k < in.size()) {
      const size_t e = in.size() - 1 - k;
      if (in[e] != 1) index += coord * stride;
      stride *= in[e];
    }
  }
  return index;
}

// sum_i w_i f(a[ia(i)], b[ib(i)]) over the broadcast shape.
double weighted_binary(const std::function<double(double, double)>& f, const std::vector<double>& w,
                       const std::vector<double>& a, const std::vector<double>& b, const Shape& out,
                       const Shape& sa, const Shape& sb) {
  double s = 0;
  for (int64_t i = 0; i < numel(out); ++i)
    s += w[size_t(i)] *
         f(a[size_t(broadcast_index(out, sa, i))], b[size_t(broadcast_index(out, sb, i))]);
  return s;
}

// Note [Broadcast gradient bounds]
// A broadcast input's gradient is a sum of rounded terms w_i df/darg(a_i, b_i). Each term
// rounds once or more in its dtype (relative error u each), so the sum's error is bounded
// by a few u times sum_i |term_i|, which can be far above u |sum| when the terms cancel.
// The bound of each gradient element is therefore slack * rtol * (that sum of |terms|),
// with df/darg by central differences of the fp64 reference f: no fitgrad formula enters.
std::vector<double> broadcast_term_magnitudes(const std::function<double(double, double)>& f,
                                              const std::vector<double>& w,
                                              const std::vector<double>& a,
                                              const std::vector<double>& b, const Shape& out,
                                              const Shape& sa, const Shape& sb, bool of_a) {
  const double h = 1e-6;
  std::vector<double> mag(size_t(numel(of_a ? sa : sb)), 0.0);
  for (int64_t i = 0; i < numel(out); ++i) {
    const double x = a[size_t(broadcast_index(out, sa, i))];
    const double y = b[size_t(broadcast_index(out, sb, i))];
    const double d =
        of_a ? (f(x + h, y) - f(x - h, y)) / (2 * h) : (f(x, y + h) - f(x, y - h)) / (2 * h);
    mag[size_t(broadcast_index(out, of_a ? sa : sb, i))] += std::fabs(w[size_t(i)] * d);
  }
  return mag;
}

const DType kDTypes[] = {DType::f32, DType::bf16, DType::f16};

std::string label(const char* op, const Shape& a, const Shape& b, DType dtype) {
  return std::string(op) + " " + shape_str(a) + " " + shape_str(b) + " " +
         std::string(dtype_name(dtype));
}

// ---- binary ops ----

struct BinaryRow {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> ref;
  // (da, db) for upstream gradient w, composed from fitgrad ops as autograd will.
  std::function<std::pair<Tensor, Tensor>(const Tensor& w, const Tensor& a, const Tensor& b)>
      backward;
  double b_lo, b_hi;  // the range of b (div keeps away from 0)
};

const BinaryRow kBinaryRows[] = {
    {"add", ops::add, [](double x, double y) { return x + y; },
     [](const Tensor& w, const Tensor& a, const Tensor& b) {
       return std::pair{ops::sum_to(w, a.shape()), ops::sum_to(w, b.shape())};
     },
     -1, 1},
    {"sub", ops::sub, [](double x, double y) { return x - y; },
     [](const Tensor& w, const Tensor& a, const Tensor& b) {
       return std::pair{ops::sum_to(w, a.shape()), ops::sum_to(ops::neg(w), b.shape())};
     },
     -1, 1},
    {"mul", ops::mul, [](double x, double y) { return x * y; },
     [](const Tensor& w, const Tensor& a, const Tensor& b) {
       return std::pair{ops::sum_to(ops::mul(w, b), a.shape()),
                        ops::sum_to(ops::mul(w, a), b.shape())};
     },
     -1, 1},
    {"div", ops::div, [](double x, double y) { return x / y; },
     [](const Tensor& w, const Tensor& a, const Tensor& b) {
       return std::pair{ops::sum_to(ops::div(w, b), a.shape()),
                        ops::sum_to(ops::neg(ops::div(ops::mul(w, a), ops::mul(b, b))), b.shape())};
     },
     0.5, 2},
};

struct BinaryShapes {
  Shape a, b;
  Layout la, lb;
};

const BinaryShapes kBinaryShapes[] = {
    {{3, 4}, {3, 4}, Layout::contiguous, Layout::contiguous},
    {{2, 3, 4}, {4}, Layout::transposed, Layout::contiguous},
    {{2, 1, 4}, {3, 1}, Layout::strided, Layout::contiguous},
    {{4, 3}, {4, 3}, Layout::transposed, Layout::strided},
    {{}, {2, 3}, Layout::contiguous, Layout::transposed},
    {{5, 1, 6}, {1, 4, 1}, Layout::strided, Layout::contiguous},
    {{0, 3}, {3}, Layout::contiguous, Layout::contiguous},
};

TEST(ElementwiseBinary, ForwardMatchesFp64Reference) {
  uint64_t seed = 1;
  for (const BinaryRow& row : kBinaryRows)
    for (const BinaryShapes& s : kBinaryShapes)
      for (DType dtype : kDTypes) {
        SCOPED_TRACE(label(row.name, s.a, s.b, dtype));
        const Tensor a = make_input(s.a, seed++, dtype, s.la);
        const Tensor b = make_input(s.b, seed++, dtype, s.lb, row.b_lo, row.b_hi);
        const Tensor out = row.op(a, b);
        const Shape shape = broadcast_shapes(s.a, s.b, "test");
        ASSERT_EQ(out.shape(), shape);
        ASSERT_EQ(out.dtype(), dtype);
        ASSERT_TRUE(out.is_contiguous());
        const std::vector<double> av = to_f64(a), bv = to_f64(b);
        std::vector<double> want(size_t(numel(shape)));
        for (int64_t i = 0; i < numel(shape); ++i)
          want[size_t(i)] = row.ref(av[size_t(broadcast_index(shape, s.a, i))],
                                    bv[size_t(broadcast_index(shape, s.b, i))]);
        EXPECT_TRUE(close_for(dtype, to_f64(out), want));
      }
}

TEST(ElementwiseBinary, BackwardMatchesFiniteDifferences) {
  uint64_t seed = 100;
  for (const BinaryRow& row : kBinaryRows)
    for (const BinaryShapes& s : kBinaryShapes)
      for (DType dtype : kDTypes) {
        SCOPED_TRACE(label(row.name, s.a, s.b, dtype));
        const Tensor a = make_input(s.a, seed++, dtype, s.la);
        const Tensor b = make_input(s.b, seed++, dtype, s.lb, row.b_lo, row.b_hi);
        const Shape shape = broadcast_shapes(s.a, s.b, "test");
        const Tensor w = random_tensor(shape, seed++, dtype);
        const auto [da, db] = row.backward(w, a, b);
        ASSERT_EQ(da.shape(), s.a);
        ASSERT_EQ(db.shape(), s.b);
        const std::vector<double> av = to_f64(a), bv = to_f64(b), wv = to_f64(w);
        const auto fa = [&](const std::vector<double>& x) {
          return weighted_binary(row.ref, wv, x, bv, shape, s.a, s.b);
        };
        const auto fb = [&](const std::vector<double>& y) {
          return weighted_binary(row.ref, wv, av, y, shape, s.a, s.b);
        };
        // Note [Broadcast gradient bounds]: up to three roundings a term (div's db), and one
        // of the sum; f32 also carries the central differences' error.
        const double bound = (dtype == DType::f32 ? 10 : 2) * tolerance_for(dtype).rtol;
        const auto bounds = [&](bool of_a) {
          std::vector<double> m =
              broadcast_term_magnitudes(row.ref, wv, av, bv, shape, s.a, s.b, of_a);
          for (double& x : m) x *= bound;
          return m;
        };
        EXPECT_TRUE(all_within(to_f64(da), finite_diff(fa, av), bounds(true))) << "da";
        EXPECT_TRUE(all_within(to_f64(db), finite_diff(fb, bv), bounds(false))) << "db";
      }
}

// Long rows split across chunks mid-row, through the parallel path.
TEST(ElementwiseBinary, LargeBroadcastAcrossChunksMatchesReference) {
  const Shape sa = {37, 1001}, sb = {1001};
  const Tensor a = make_input(sa, 7, DType::f32, Layout::transposed);
  const Tensor b = make_input(sb, 8, DType::f32, Layout::strided);
  const Tensor out = ops::mul(a, b);
  const std::vector<double> av = to_f64(a), bv = to_f64(b);
  std::vector<double> want(size_t(numel(sa)));
  for (int64_t i = 0; i < numel(sa); ++i) want[size_t(i)] = av[size_t(i)] * bv[size_t(i % 1001)];
  EXPECT_TRUE(all_close(to_f64(out), want, 1e-6, 0));
}

// ---- unary and scalar ops ----

struct UnaryRow {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  std::function<Tensor(const Tensor& w, const Tensor& x)> backward;  // composed, as autograd will
  double lo, hi;
};

const UnaryRow kUnaryRows[] = {
    {"neg", ops::neg, [](double x) { return -x; },
     [](const Tensor& w, const Tensor&) { return ops::neg(w); }, -1, 1},
    {"exp", ops::exp, [](double x) { return std::exp(x); },
     [](const Tensor& w, const Tensor& x) { return ops::mul(w, ops::exp(x)); }, -2, 2},
    {"log", ops::log, [](double x) { return std::log(x); },
     [](const Tensor& w, const Tensor& x) { return ops::div(w, x); }, 0.5, 3},
    {"sqrt", ops::sqrt, [](double x) { return std::sqrt(x); },
     [](const Tensor& w, const Tensor& x) { return ops::scale(ops::div(w, ops::sqrt(x)), 0.5); },
     0.5, 3},
    {"rsqrt", ops::rsqrt, [](double x) { return 1 / std::sqrt(x); },
     [](const Tensor& w, const Tensor& x) {
       return ops::scale(ops::mul(w, ops::pow(x, -1.5)), -0.5);
     },
     0.5, 3},
    {"pow3", [](const Tensor& x) { return ops::pow(x, 3); }, [](double x) { return x * x * x; },
     [](const Tensor& w, const Tensor& x) { return ops::scale(ops::mul(w, ops::pow(x, 2)), 3); },
     -1.5, 1.5},
    {"pow-1.5", [](const Tensor& x) { return ops::pow(x, -1.5); },
     [](double x) { return std::pow(x, -1.5); },
     [](const Tensor& w, const Tensor& x) {
       return ops::scale(ops::mul(w, ops::pow(x, -2.5)), -1.5);
     },
     0.5, 3},
    {"scale", [](const Tensor& x) { return ops::scale(x, 2.5); }, [](double x) { return 2.5 * x; },
     [](const Tensor& w, const Tensor&) { return ops::scale(w, 2.5); }, -1, 1},
    {"add_scalar", [](const Tensor& x) { return ops::add_scalar(x, -0.75); },
     [](double x) { return x - 0.75; }, [](const Tensor& w, const Tensor&) { return w; }, -1, 1},
};

struct UnaryShape {
  Shape shape;
  Layout layout;
};

const UnaryShape kUnaryShapes[] = {{{3, 5}, Layout::contiguous},
                                   {{2, 3, 4}, Layout::transposed},
                                   {{4, 6}, Layout::strided},
                                   {{}, Layout::contiguous},
                                   {{0, 2}, Layout::contiguous}};

TEST(ElementwiseUnary, ForwardAndBackwardMatchFp64) {
  uint64_t seed = 500;
  for (const UnaryRow& row : kUnaryRows)
    for (const UnaryShape& s : kUnaryShapes)
      for (DType dtype : kDTypes) {
        SCOPED_TRACE(label(row.name, s.shape, {}, dtype));
        const Tensor x = make_input(s.shape, seed++, dtype, s.layout, row.lo, row.hi);
        const Tensor y = row.op(x);
        ASSERT_EQ(y.shape(), s.shape);
        ASSERT_EQ(y.dtype(), dtype);
        const std::vector<double> xv = to_f64(x);
        std::vector<double> want(xv.size());
        for (size_t i = 0; i < xv.size(); ++i) want[i] = row.ref(xv[i]);
        EXPECT_TRUE(close_for(dtype, to_f64(y), want)) << "forward";

        const Tensor w = random_tensor(s.shape, seed++, dtype);
        const std::vector<double> wv = to_f64(w);
        const auto f = [&](const std::vector<double>& v) {
          double sum = 0;
          for (size_t i = 0; i < v.size(); ++i) sum += wv[i] * row.ref(v[i]);
          return sum;
        };
        // A composed backward rounds once per op: allow for three roundings.
        EXPECT_TRUE(close_for(dtype, to_f64(row.backward(w, x)), finite_diff(f, xv),
                              dtype == DType::f32 ? 10 : 3))
            << "backward";
      }
}

// ---- add_ ----

TEST(ElementwiseAddInPlace, AccumulatesIntoViewsAndKeepsTheDtype) {
  struct Row {
    Shape dst, src;
    DType dst_dtype, src_dtype;
    Layout layout;
  };
  const Row rows[] = {{{3, 4}, {3, 4}, DType::f32, DType::f32, Layout::transposed},
                      {{2, 3, 4}, {3, 1}, DType::f32, DType::bf16, Layout::strided},
                      {{4, 5}, {5}, DType::bf16, DType::f32, Layout::contiguous},
                      {{2, 6}, {}, DType::f16, DType::f16, Layout::transposed}};
  uint64_t seed = 900;
  for (const Row& r : rows) {
    SCOPED_TRACE(label("add_", r.dst, r.src, r.dst_dtype));
    Tensor base = make_input(r.dst, seed++, r.dst_dtype, r.layout);
    const Tensor src = make_input(r.src, seed++, r.src_dtype, Layout::contiguous);
    const std::vector<double> before = to_f64(base), sv = to_f64(src);
    const void* data = base.storage()->data();
    ops::add_(base, src);
    EXPECT_EQ(base.dtype(), r.dst_dtype);
    EXPECT_EQ(base.storage()->data(), data);  // in place
    std::vector<double> want(before.size());
    for (int64_t i = 0; i < numel(r.dst); ++i)
      want[size_t(i)] = before[size_t(i)] + sv[size_t(broadcast_index(r.dst, r.src, i))];
    EXPECT_TRUE(close_for(r.dst_dtype, to_f64(base), want));
  }
}

TEST(ElementwiseAddInPlace, SourceAliasingTheDestination) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  ops::add_(x, x);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{2, 4, 6, 8}));
  Tensor y = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  ops::add_(y, y.transpose(0, 1));  // reads elements the loop has already written
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 5, 5, 8}));
}

// ---- dtype promotion ----

// PyTorch's rule for floating operands: equal dtypes stay, f32 with anything is f32, and
// bf16 with f16 is f32. The result is the fp64 op on the stored values, rounded once.
TEST(ElementwisePromotion, MixedFloatingDtypesPromoteAsPyTorch) {
  struct Row {
    DType a, b, want;
  };
  const Row rows[] = {
      {DType::f32, DType::bf16, DType::f32},   {DType::bf16, DType::f32, DType::f32},
      {DType::f16, DType::f32, DType::f32},    {DType::bf16, DType::f16, DType::f32},
      {DType::bf16, DType::bf16, DType::bf16}, {DType::f16, DType::f16, DType::f16}};
  for (const Row& r : rows) {
    SCOPED_TRACE(std::string(dtype_name(r.a)) + " * " + std::string(dtype_name(r.b)));
    const Tensor a = random_tensor({3, 4}, 60, r.a), b = random_tensor({4}, 61, r.b);
    const Tensor y = ops::mul(a, b);
    ASSERT_EQ(y.dtype(), r.want);
    const std::vector<double> av = to_f64(a), bv = to_f64(b);
    std::vector<double> want(12);
    for (size_t i = 0; i < 12; ++i) want[i] = av[i] * bv[i % 4];
    EXPECT_TRUE(close_for(r.want, to_f64(y), want));
  }
}

// ---- errors and meta ----

TEST(ElementwiseErrors, NameTheOpAndTheProblem) {
  const Tensor a = Tensor::zeros({2, 3});
  const Tensor b = Tensor::zeros({4});
  expect_error([&] { ops::add(a, b); }, "[add] shapes (2, 3) and (4)");
  expect_error([&] { ops::mul(a, Tensor::zeros({2, 3}, DType::i32)); }, "[mul] b must be f32");
  expect_error(
      [&] {
        ops::sub(a, Tensor::empty({2, 3}, DType::f32, Device::meta()));
      },
      "[sub] tensors are on cpu and meta");
  expect_error([&] { ops::div(Tensor::zeros({2}, DType::i64), Tensor::zeros({2}, DType::i64)); },
               "[div] a must be f32, f16 or bf16");
  expect_error([&] { ops::exp(Tensor::zeros({2}, DType::i32)); }, "[exp] a must be");
  expect_error([&] { ops::neg(Tensor()); }, "[neg] a is undefined");
  Tensor dst = Tensor::zeros({3});
  expect_error([&] { ops::add_(dst, a); }, "[add_]");
  Tensor expanded = Tensor::zeros({1, 3}).expand({2, 3});
  expect_error([&] { ops::add_(expanded, a); }, "[add_] dst of shape (2, 3) is an expanded view");
  expect_error([&] { ops::add_(dst, Tensor::zeros({3}, DType::u8)); }, "[add_] src must be");
}

TEST(ElementwiseMeta, AllocatesTheOutputWithoutComputing) {
  const Device meta = Device::meta();
  const Tensor a = Tensor::empty({2, 1, 4}, DType::bf16, meta);
  const Tensor b = Tensor::empty({3, 1}, DType::bf16, meta);
  for (const Tensor& out : {ops::add(a, b), ops::div(a, b)}) {
    EXPECT_EQ(out.shape(), (Shape{2, 3, 4}));
    EXPECT_EQ(out.dtype(), DType::bf16);
    EXPECT_EQ(out.device(), meta);
  }
  const Tensor y = ops::pow(a.transpose(0, 2), 2.0);
  EXPECT_EQ(y.shape(), (Shape{4, 1, 2}));
  EXPECT_EQ(y.device(), meta);
  Tensor acc = Tensor::empty({2, 3, 4}, DType::f32, meta);
  ops::add_(acc, b);
  EXPECT_EQ(acc.shape(), (Shape{2, 3, 4}));
}

}  // namespace
}  // namespace fitgrad::testing
