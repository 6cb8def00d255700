// rope: forward against an fp64 reference written from the Hugging Face Llama definition
// (rotate_half, inv_freq = theta^(-2i/D)), backward against finite differences of that
// reference, for several shapes, offsets, bases and dtypes (one table row each); then the
// inverse property, errors and meta allocation; the scaled frequencies (Note [RoPE
// frequencies]) against transformers' inv_freq, and the op rotating by them.
#include "tensor/ops/rope.h"

#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::testing {
namespace {

struct RopeCase {
  const char* name;
  Shape shape;  // (B, H, T, D)
  int64_t offset;
  double theta;
  DType dtype;
};

std::vector<RopeCase> rope_cases() {
  struct Base {
    const char* name;
    Shape shape;
    int64_t offset;
    double theta;
  };
  const Base bases[] = {
      {"llama2", {1, 2, 5, 8}, 0, 1e4},
      {"llama3_offset", {2, 1, 3, 6}, 7, 5e5},
      {"pair", {1, 1, 4, 2}, 0, 1e4},
      {"long_offset", {1, 1, 2, 4}, 4000, 1e4},
  };
  std::vector<RopeCase> out;
  for (const Base& b : bases)
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      out.push_back({b.name, b.shape, b.offset, b.theta, dt});
  return out;
}

// fp64 HF Llama RoPE: q * cos + rotate_half(q) * sin, with cos/sin of the angles
// (offset + t) * inv_freq repeated over both halves; rotate_half(q) = (-q2, q1).
std::vector<double> reference(const std::vector<double>& x, const Shape& s, int64_t offset,
                              const RopeParams& rope) {
  const int64_t T = s[2], D = s[3], half = D / 2;
  std::vector<double> y(x.size());
  for (size_t row = 0; row < x.size() / size_t(D); ++row) {
    const int64_t t = int64_t(row) % T;
    const double* q = x.data() + row * size_t(D);
    double* out = y.data() + row * size_t(D);
    for (int64_t j = 0; j < D; ++j) {
      const int64_t i = j % half;
      const double frequency = rope.scaling.type == RopeScaling::Type::none
                                   ? std::pow(rope.theta, -double(2 * i) / double(D))
                                   : rope_frequency(i, D, rope);
      const double angle = double(offset + t) * frequency;
      const double rotated = j < half ? -q[j + half] : q[j - half];
      out[j] = q[j] * std::cos(angle) + rotated * std::sin(angle);
    }
  }
  return y;
}

class RopeTest : public ::testing::TestWithParam<RopeCase> {};

TEST_P(RopeTest, ForwardMatchesFp64Reference) {
  const RopeCase& c = GetParam();
  const Tensor x = random_tensor(c.shape, 60, c.dtype);
  const Tensor y = ops::rope(x, c.offset, c.theta);
  EXPECT_EQ(y.shape(), c.shape);
  EXPECT_EQ(y.dtype(), c.dtype);
  // f32 cos/sin of angles up to ~4000 rad carry ~1e-7 absolute error each.
  EXPECT_TRUE(close_for(c.dtype, to_f64(y), reference(to_f64(x), c.shape, c.offset, c.theta)));
}

TEST_P(RopeTest, BackwardMatchesFiniteDifferences) {
  const RopeCase& c = GetParam();
  const Tensor x = random_tensor(c.shape, 61, c.dtype);
  const Tensor dy = random_tensor(c.shape, 62, c.dtype);
  const Tensor dx = ops::rope_backward(dy, c.offset, c.theta);
  EXPECT_EQ(dx.dtype(), c.dtype);
  const std::vector<double> dyv = to_f64(dy);
  auto loss = [&](const std::vector<double>& xv) {
    const std::vector<double> y = reference(xv, c.shape, c.offset, c.theta);
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += dyv[i] * y[i];
    return s;
  };
  EXPECT_TRUE(close_for(c.dtype, to_f64(dx), finite_diff(loss, to_f64(x))));
}

INSTANTIATE_TEST_SUITE_P(Rope, RopeTest, ::testing::ValuesIn(rope_cases()), [](const auto& info) {
  return std::string(info.param.name) + "_" + std::string(dtype_name(info.param.dtype));
});

// transformers 4.46.3's inv_freq (float32, ROPE_INIT_FUNCTIONS) for Llama 3.1 8B's
// rope_scaling (theta 500000, head dim 128, llama3: factor 8, low 1, high 4, original context
// 8192): pairs 0-28 kept, 35-63 divided by 8, 29-34 between; and for a linear factor 4 at
// theta 10000, head dim 64.
TEST(RopeScaling, FrequenciesAreTransformers) {
  const RopeParams llama31(500000.0, {RopeScaling::Type::llama3, 8.0, 1.0, 4.0, 8192.0});
  const std::pair<int64_t, double> llama3_inv_freq[] = {{0, 1.0},
                                                        {20, 0.016560440883040428},
                                                        {28, 0.0032114461064338684},
                                                        {29, 0.0021665706299245358},
                                                        {30, 0.0013718936825171113},
                                                        {31, 0.0008567514596506953},
                                                        {32, 0.0005248460220173001},
                                                        {33, 0.0003126936499029398},
                                                        {34, 0.0001785077911335975},
                                                        {35, 9.556212171446532e-05},
                                                        {63, 3.068925877869333e-07}};
  for (const auto& [i, want] : llama3_inv_freq)
    EXPECT_NEAR(rope_frequency(i, 128, llama31), want, 2e-6 * want) << "pair " << i;
  const RopeParams linear(10000.0, {RopeScaling::Type::linear, 4.0});
  const double linear_inv_freq[] = {0.25,
                                    0.05928434059023857,
                                    0.014058532193303108,
                                    0.0033338037319481373,
                                    0.0007905694656074047,
                                    0.00018747354624792933,
                                    4.4456985051510856e-05};
  for (int64_t k = 0; k < 7; ++k)
    EXPECT_NEAR(rope_frequency(5 * k, 64, linear), linear_inv_freq[k], 2e-6 * linear_inv_freq[k])
        << "pair " << 5 * k;
  // Unscaled, the frequency is theta^(-2i/D) exactly as before.
  EXPECT_EQ(rope_frequency(7, 64, RopeParams(10000.0)), std::pow(10000.0, -14.0 / 64.0));
}

// The op with llama3 scaling, at positions past the original context, in every dtype.
TEST(RopeScaling, TheOpRotatesByTheScaledFrequencies) {
  const RopeParams rope(500000.0, {RopeScaling::Type::llama3, 8.0, 1.0, 4.0, 64.0});
  const Shape shape{1, 2, 5, 32};
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    const Tensor x = random_tensor(shape, 64, dtype);
    const Tensor y = ops::rope(x, 300, rope);
    EXPECT_TRUE(close_for(dtype, to_f64(y), reference(to_f64(x), shape, 300, rope)))
        << dtype_name(dtype);
    const Tensor back = ops::rope_backward(y.to(DType::f32), 300, rope);
    EXPECT_TRUE(close_for(dtype, to_f64(back), to_f64(x), 2.0)) << dtype_name(dtype);
  }
  expect_error(
      [&] {
        ops::rope(random_tensor(shape, 1), 0, RopeParams(1e4, {RopeScaling::Type::linear, 0.5}));
      },
      "[rope]", "scaling factor 0.5 must be at least 1");
}

TEST(RopeInverse, BackwardUndoesForward) {
  const Tensor x = random_tensor({2, 3, 7, 16}, 63);
  const Tensor back = ops::rope_backward(ops::rope(x, 3, 1e4), 3, 1e4);
  EXPECT_TRUE(all_close(to_f64(back), to_f64(x), 1e-5, 1e-6));
  // Position 0 (no offset) is the identity.
  const Tensor first = x.narrow(2, 0, 1).contiguous();
  EXPECT_EQ(ops::rope(first, 0, 1e4).to_vector<float>(), first.to_vector<float>());
}

// Throws fitgrad::Error whose message starts with `prefix`.

TEST(RopeErrors, BadShapesDtypesAndArguments) {
  expect_error([] { ops::rope(Tensor::zeros({1, 1, 2, 5}), 0, 1e4); }, "[rope]");
  expect_error([] { ops::rope(Tensor::zeros({1, 2, 6}), 0, 1e4); }, "[rope]");
  expect_error([] { ops::rope(Tensor::zeros({1, 1, 2, 4}, DType::i32), 0, 1e4); }, "[rope]");
  expect_error([] { ops::rope(Tensor::zeros({1, 1, 2, 4}), -1, 1e4); }, "[rope]");
  expect_error([] { ops::rope(Tensor::zeros({1, 1, 2, 4}), 0, 0); }, "[rope]");
  expect_error([] { ops::rope_backward(Tensor::zeros({1, 1, 2, 3}), 0, 1e4); }, "[rope_backward]");
}

TEST(RopeMeta, AllocatesOutputsOnly) {
  const Tensor x = Tensor::empty({2, 4, 8, 16}, DType::bf16, Device::meta());
  for (const Tensor& y : {ops::rope(x, 5, 1e4), ops::rope_backward(x, 5, 1e4)}) {
    EXPECT_EQ(y.shape(), x.shape());
    EXPECT_EQ(y.dtype(), DType::bf16);
    EXPECT_EQ(y.device(), Device::meta());
  }
}

}  // namespace
}  // namespace fitgrad::testing
