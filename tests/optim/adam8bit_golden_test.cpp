// Adam8bit against tests/golden/gen_adam8bit_golden.py, the independent NumPy reference of
// bitsandbytes' blockwise 8-bit Adam: 20 steps on two 8-bit parameters (one with a partial
// last block, one with a block of zero gradients, so an absmax of 0) and two small ones on
// the 32-bit path, a skipped parameter, and non-finite gradients that must leave their
// parameters untouched. Every step's parameters, 8-bit codes, absmaxes and f32 states must
// equal the reference's bit for bit (Note [Adam8bit kernel]); so must the dynamic maps.
#include <gtest/gtest.h>

#include <cstring>

#include "autograd/variable.h"
#include "optim/adam8bit.h"
#include "tensor/quant/dynamic_map.h"
#include "tests/golden/golden_file.h"
#include "tests/optim/golden_groups.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::optim {
namespace {

using testing::GoldenFile;

GoldenFile& file() {
  static GoldenFile f(testing::golden_path("optim_adam8bit.gtb"));
  return f;
}

// The reference's codes: eight per i64, code j in byte j % 8 of element j / 8.
std::vector<uint8_t> unpack_codes(const Tensor& packed, int64_t n) {
  std::vector<uint8_t> out(size_t(packed.numel() * 8));
  std::memcpy(out.data(), packed.data<int64_t>(), out.size());
  out.resize(size_t(n));
  return out;
}

// Counts the elements of a and b whose bits differ (both read as f32).
int64_t bit_mismatches(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(DType::f32).contiguous(), y = b.to(DType::f32).contiguous();
  if (x.numel() != y.numel()) return -1;
  int64_t bad = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    bad += std::memcmp(x.data<float>() + i, y.data<float>() + i, 4) != 0;
  return bad;
}

TEST(DynamicMap, EqualsTheReferenceBitForBit) {
  const Tensor s = file().tensor("map.signed"), u = file().tensor("map.unsigned");
  for (size_t i = 0; i < 256; ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(quant::dynamic_map_signed()[i]),
              std::bit_cast<uint32_t>(s.data<float>()[i]))
        << "signed " << i;
    EXPECT_EQ(std::bit_cast<uint32_t>(quant::dynamic_map_unsigned()[i]),
              std::bit_cast<uint32_t>(u.data<float>()[i]))
        << "unsigned " << i;
  }
}

TEST(Adam8bitGolden, CodesAbsmaxesAndParametersEqualTheReferenceAtEveryStep) {
  const auto& meta = file().meta();
  auto [params, groups] = testing::golden_params(file());
  Adam8bitOptions o;
  o.beta1 = meta.at("betas").at(0).get<double>();
  o.beta2 = meta.at("betas").at(1).get<double>();
  o.eps = meta.at("eps").get<double>();
  Adam8bit opt(std::move(groups), o);
  const int steps = meta.at("steps").get<int>();
  for (int k = 0; k < steps; ++k) {
    const std::string ks = std::to_string(k);
    for (auto& [name, p] : params) {
      if (file().has("grad." + ks + "." + name))
        autograd::ensure_meta(p).grad = file().tensor("grad." + ks + "." + name);
      else
        autograd::clear_grad(p);
    }
    opt.set_lr(meta.at("lr").at(size_t(k)).get<double>());
    opt.step();
    const auto state = opt.state_dict();
    for (const auto& [name, p] : params) {
      const std::string at = " at step " + ks;
      EXPECT_EQ(bit_mismatches(p, file().tensor("param." + ks + "." + name)), 0) << name << at;
      if (!state.count(name + ".state1")) {
        ADD_FAILURE() << name << " has no state" << at;
        continue;
      }
      const Tensor s1 = state.at(name + ".state1"), s2 = state.at(name + ".state2");
      if (s1.dtype() == DType::f32) {
        EXPECT_EQ(bit_mismatches(s1, file().tensor("state1." + ks + "." + name)), 0) << name << at;
        EXPECT_EQ(bit_mismatches(s2, file().tensor("state2." + ks + "." + name)), 0) << name << at;
        continue;
      }
      const int64_t n = p.numel();
      for (const auto& [key, t] : {std::pair{"state1", s1}, std::pair{"state2", s2}}) {
        const auto want = unpack_codes(file().tensor(std::string(key) + "." + ks + "." + name), n);
        const Tensor got = t.contiguous();
        int64_t bad = 0;
        for (int64_t i = 0; i < n; ++i) bad += got.data<uint8_t>()[i] != want[size_t(i)];
        EXPECT_EQ(bad, 0) << name << "." << key << at;
      }
      for (const char* key : {"absmax1", "absmax2"})
        EXPECT_EQ(bit_mismatches(state.at(name + "." + key),
                                 file().tensor(std::string(key) + "." + ks + "." + name)),
                  0)
            << name << "." << key << at;
    }
  }
  const auto state = opt.state_dict();
  for (const auto& [name, p] : params)
    EXPECT_EQ(state.at(name + ".step").item(), file().tensor(name + ".step").item()) << name;
}

TEST(Adam8bit, SmallTensorsKeepF32StateAndLargeOnesTwoBytesAndAnAbsmaxPerBlock) {
  const std::vector<ParamGroup> groups{ParamGroup{
      {{"big", testing::random_tensor({4096}, 1)}, {"small", testing::random_tensor({4095}, 2)}},
      0.0}};
  const Adam8bit opt(groups, {});
  EXPECT_EQ(state_bytes(opt.state_specs(0)), 2 * 4096 + 2 * 4 * 16);
  EXPECT_EQ(opt.state_specs(0)[0].dtype, DType::u8);
  EXPECT_EQ(state_bytes(opt.state_specs(1)), 8 * 4095);
}

}  // namespace
}  // namespace fitgrad::optim
