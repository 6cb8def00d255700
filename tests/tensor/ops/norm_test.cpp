// layer_norm and rms_norm: forward (y and the f32 statistics) against an fp64 reference,
// every gradient (dx, dweight, dbias) against finite differences of that reference, for
// several shapes, parameter combinations and dtypes (one table row each); then bitwise
// reproducibility of the weight gradients, errors and meta allocation.
#include "tensor/ops/norm.h"

#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

constexpr double kEps = 1e-5;

struct NormCase {
  const char* name;
  bool rms;
  Shape shape;  // (..., C)
  bool weight, bias;
  DType dtype;
};

std::vector<NormCase> norm_cases() {
  struct Base {
    const char* name;
    bool rms;
    Shape shape;
    bool weight, bias;
  };
  const Base bases[] = {
      {"ln_affine", false, {3, 8}, true, true},  {"ln_3d", false, {2, 3, 6}, true, true},
      {"ln_weight", false, {4, 5}, true, false}, {"ln_bias", false, {2, 7}, false, true},
      {"ln_plain", false, {9}, false, false},    {"rms_weight", true, {3, 8}, true, false},
      {"rms_3d", true, {2, 2, 5}, true, false},  {"rms_plain", true, {4, 6}, false, false},
  };
  std::vector<NormCase> out;
  for (const Base& b : bases)
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      out.push_back({b.name, b.rms, b.shape, b.weight, b.bias, dt});
  return out;
}

struct Ref {
  std::vector<double> y, mean, rstd;
};

// fp64 layer norm or RMS norm over the last dim; w and b empty when absent.
Ref reference(const NormCase& c, const std::vector<double>& x, const std::vector<double>& w,
              const std::vector<double>& b) {
  const int64_t C = c.shape.back();
  const int64_t rows = int64_t(x.size()) / C;
  Ref r{std::vector<double>(x.size()), {}, {}};
  for (int64_t i = 0; i < rows; ++i) {
    const double* xr = x.data() + i * C;
    double mean = 0, sq = 0;
    if (!c.rms) {
      for (int64_t j = 0; j < C; ++j) mean += xr[j];
      mean /= double(C);
    }
    for (int64_t j = 0; j < C; ++j) sq += (xr[j] - mean) * (xr[j] - mean);
    const double rstd = 1 / std::sqrt(sq / double(C) + kEps);
    for (int64_t j = 0; j < C; ++j)
      r.y[size_t(i * C + j)] = (xr[j] - mean) * rstd * (w.empty() ? 1.0 : w[size_t(j)]) +
                               (b.empty() ? 0.0 : b[size_t(j)]);
    r.mean.push_back(mean);
    r.rstd.push_back(rstd);
  }
  return r;
}

struct Inputs {
  Tensor x, w, b;
};

Inputs make_inputs(const NormCase& c, uint64_t seed) {
  const Shape param{c.shape.back()};
  return {random_tensor(c.shape, seed, c.dtype, -2, 2),
          c.weight ? random_tensor(param, seed + 1, c.dtype, 0.5, 1.5) : Tensor(),
          c.bias ? random_tensor(param, seed + 2, c.dtype) : Tensor()};
}

std::vector<double> values_or_empty(const Tensor& t) {
  return t.defined() ? to_f64(t) : std::vector<double>{};
}

class NormTest : public ::testing::TestWithParam<NormCase> {};

TEST_P(NormTest, ForwardMatchesFp64Reference) {
  const NormCase& c = GetParam();
  const Inputs in = make_inputs(c, 10);
  const Ref want = reference(c, to_f64(in.x), values_or_empty(in.w), values_or_empty(in.b));
  const Shape rows(c.shape.begin(), c.shape.end() - 1);
  Tensor y, rstd;
  if (c.rms) {
    const ops::RmsNormOut out = ops::rms_norm(in.x, in.w, kEps);
    y = out.y;
    rstd = out.rstd;
  } else {
    const ops::LayerNormOut out = ops::layer_norm(in.x, in.w, in.b, kEps);
    y = out.y;
    rstd = out.rstd;
    EXPECT_EQ(out.mean.shape(), rows);
    EXPECT_EQ(out.mean.dtype(), DType::f32);
    EXPECT_TRUE(close_for(DType::f32, to_f64(out.mean), want.mean));
  }
  EXPECT_EQ(y.dtype(), c.dtype);
  EXPECT_EQ(y.shape(), c.shape);
  EXPECT_TRUE(close_for(c.dtype, to_f64(y), want.y));
  EXPECT_EQ(rstd.shape(), rows);
  EXPECT_EQ(rstd.dtype(), DType::f32);
  EXPECT_TRUE(close_for(DType::f32, to_f64(rstd), want.rstd));
}

TEST_P(NormTest, BackwardMatchesFiniteDifferences) {
  const NormCase& c = GetParam();
  const Inputs in = make_inputs(c, 20);
  const Tensor dy = random_tensor(c.shape, 23, c.dtype);
  const std::vector<double> x = to_f64(in.x), w = values_or_empty(in.w), b = values_or_empty(in.b),
                            dyv = to_f64(dy);
  // loss(x, w, b) = sum(dy * norm(x, w, b)); each gradient perturbs one argument.
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& wv,
                  const std::vector<double>& bv) {
    const std::vector<double> y = reference(c, xv, wv, bv).y;
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += dyv[i] * y[i];
    return s;
  };
  Tensor dx, dw, db;
  if (c.rms) {
    const ops::RmsNormOut out = ops::rms_norm(in.x, in.w, kEps);
    const ops::RmsNormGrads g = ops::rms_norm_backward(dy, in.x, in.w, out.rstd);
    dx = g.dx;
    dw = g.dweight;
  } else {
    const ops::LayerNormOut out = ops::layer_norm(in.x, in.w, in.b, kEps);
    const ops::LayerNormGrads g =
        ops::layer_norm_backward(dy, in.x, in.w, out.mean, out.rstd, c.bias);
    dx = g.dx;
    dw = g.dweight;
    db = g.dbias;
  }
  EXPECT_EQ(dx.dtype(), c.dtype);
  EXPECT_TRUE(
      close_for(c.dtype, to_f64(dx), finite_diff([&](const auto& v) { return loss(v, w, b); }, x)))
      << "dx";
  EXPECT_EQ(dw.defined(), c.weight);
  if (c.weight) {
    EXPECT_EQ(dw.dtype(), c.dtype);
    EXPECT_TRUE(close_for(c.dtype, to_f64(dw),
                          finite_diff([&](const auto& v) { return loss(x, v, b); }, w)))
        << "dweight";
  }
  EXPECT_EQ(db.defined(), c.bias);
  if (c.bias) {
    EXPECT_TRUE(close_for(c.dtype, to_f64(db),
                          finite_diff([&](const auto& v) { return loss(x, w, v); }, b)))
        << "dbias";
  }
}

INSTANTIATE_TEST_SUITE_P(Norm, NormTest, ::testing::ValuesIn(norm_cases()), [](const auto& info) {
  return std::string(info.param.name) + "_" + std::string(dtype_name(info.param.dtype));
});

TEST(NormDeterminism, WeightGradientsAreBitwiseReproducible) {
  // 257 rows split over the thread partitions; two runs agree bit for bit.
  const Tensor x = random_tensor({257, 33}, 30), w = random_tensor({33}, 31);
  const Tensor b = random_tensor({33}, 32), dy = random_tensor({257, 33}, 33);
  const ops::LayerNormOut out = ops::layer_norm(x, w, b, kEps);
  const ops::LayerNormGrads g1 = ops::layer_norm_backward(dy, x, w, out.mean, out.rstd);
  const ops::LayerNormGrads g2 = ops::layer_norm_backward(dy, x, w, out.mean, out.rstd);
  EXPECT_EQ(g1.dweight.to_vector<float>(), g2.dweight.to_vector<float>());
  EXPECT_EQ(g1.dbias.to_vector<float>(), g2.dbias.to_vector<float>());
  const ops::RmsNormOut rout = ops::rms_norm(x, w, kEps);
  EXPECT_EQ(ops::rms_norm_backward(dy, x, w, rout.rstd).dweight.to_vector<float>(),
            ops::rms_norm_backward(dy, x, w, rout.rstd).dweight.to_vector<float>());
}

// Throws fitgrad::Error whose message starts with `prefix`.

TEST(NormErrors, BadShapesAndDtypes) {
  const Tensor x = random_tensor({2, 4}, 40), w = random_tensor({4}, 41);
  const Tensor stat = Tensor::zeros({2});
  expect_error([&] { ops::layer_norm(x, random_tensor({3}, 42), Tensor(), kEps); }, "[layer_norm]");
  expect_error([&] { ops::layer_norm(x, w, Tensor::zeros({4}, DType::i32), kEps); },
               "[layer_norm]");
  expect_error(
      [&] {
        ops::layer_norm(Tensor::zeros({2, 4}, DType::i64), w, w, kEps);
      },
      "[layer_norm]");
  expect_error([&] { ops::layer_norm(Tensor::zeros({}), Tensor(), Tensor(), kEps); },
               "[layer_norm]");
  expect_error(
      [&] {
        ops::layer_norm(Tensor::zeros({3, 0}), Tensor(), Tensor(), kEps);
      },
      "[layer_norm]");
  expect_error([&] { ops::layer_norm(x, w, w, -1); }, "[layer_norm]");
  expect_error([&] { ops::rms_norm(x, random_tensor({2, 4}, 43), kEps); }, "[rms_norm]");
  expect_error([&] { ops::rms_norm(x, w.to(Device::meta()), kEps); }, "[rms_norm]");
  expect_error(
      [&] {
        ops::layer_norm_backward(random_tensor({4, 2}, 44), x, w, stat, stat);
      },
      "[layer_norm_backward]");
  expect_error([&] { ops::layer_norm_backward(x, x, w, Tensor::zeros({4}), stat); },
               "[layer_norm_backward]");
  expect_error([&] { ops::layer_norm_backward(x, x, w, stat, stat.to(DType::bf16)); },
               "[layer_norm_backward]");
  expect_error([&] { ops::rms_norm_backward(x, x, w, Tensor()); }, "[rms_norm_backward]");
}

TEST(NormMeta, AllocatesOutputsOnly) {
  const Device meta = Device::meta();
  const Tensor x = Tensor::empty({2, 3, 8}, DType::bf16, meta);
  const Tensor w = Tensor::empty({8}, DType::f32, meta);
  const ops::LayerNormOut ln = ops::layer_norm(x, w, w, kEps);
  EXPECT_EQ(ln.y.shape(), x.shape());
  EXPECT_EQ(ln.y.dtype(), DType::bf16);
  EXPECT_EQ(ln.y.device(), meta);
  EXPECT_EQ(ln.mean.shape(), (Shape{2, 3}));
  EXPECT_EQ(ln.rstd.dtype(), DType::f32);
  const ops::LayerNormGrads lg = ops::layer_norm_backward(x, x, w, ln.mean, ln.rstd);
  EXPECT_EQ(lg.dx.shape(), x.shape());
  EXPECT_EQ(lg.dx.dtype(), DType::bf16);
  EXPECT_EQ(lg.dweight.shape(), (Shape{8}));
  EXPECT_EQ(lg.dweight.dtype(), DType::f32);
  EXPECT_EQ(lg.dbias.device(), meta);
  const ops::RmsNormOut rn = ops::rms_norm(x, w, kEps);
  EXPECT_EQ(rn.rstd.shape(), (Shape{2, 3}));
  const ops::RmsNormGrads rg = ops::rms_norm_backward(x, x, w, rn.rstd);
  EXPECT_EQ(rg.dx.device(), meta);
  EXPECT_EQ(rg.dweight.shape(), (Shape{8}));
}

}  // namespace
}  // namespace fitgrad::testing
