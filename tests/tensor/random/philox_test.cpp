// Philox-4x32-10 and the Generator: the block function against the Random123 known-answer
// vectors, the draw-index map of Note [Philox streams] across block boundaries, statistical
// sanity of the uniforms, and Generator state handling (reserve, restore, threads, meta).
#include "tensor/random/philox.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "tensor/random/generator.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace fitgrad {
namespace {

// Random123's kat_vectors, "philox4x32 10" lines: counter, key, expected output.
struct Kat {
  PhiloxCounter counter;
  PhiloxKey key;
  PhiloxCounter want;
};
const Kat kKats[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(Philox, MatchesRandom123KnownAnswers) {
  for (const Kat& k : kKats) EXPECT_EQ(philox4x32_10(k.counter, k.key), k.want);
  static_assert(philox4x32_10({0, 0, 0, 0}, {0, 0})[0] == 0x6627e8d5u, "usable in constexpr");
}

TEST(Philox, DrawIndexMapsToBlockAndLane) {
  // Draw 4b + l of seed s is lane l of the block with counter (b lo, b hi, 0, 0), key s.
  const uint64_t seed = 0x123456789abcdef0ull;
  const uint64_t block = (uint64_t(3) << 32) + 5;
  const PhiloxCounter bits = philox4x32_10({5, 3, 0, 0}, {0x9abcdef0u, 0x12345678u});
  for (uint64_t lane = 0; lane < 4; ++lane)
    EXPECT_EQ(philox_uniform(seed, block * 4 + lane), float(bits[lane] >> 8) * 0x1p-24f);
  EXPECT_EQ(uniform_from_bits(0xffffffffu), 1.0f - 0x1p-24f);
  EXPECT_EQ(uniform_from_bits(0xffu), 0.0f);
}

TEST(Philox, ForEachUniformAgreesWithSingleDrawsAcrossBlockBoundaries) {
  for (uint64_t offset : {0ull, 1ull, 3ull, 4ull, 6ull, (1ull << 34) + 2}) {
    for (int64_t n : {1, 2, 5, 9}) {
      std::vector<float> got(size_t(n), -1.0f);
      std::vector<int> hits(size_t(n), 0);
      philox_for_each_uniform(42, offset, n, [&](int64_t i, float u) {
        got[size_t(i)] = u;
        ++hits[size_t(i)];
      });
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(hits[size_t(i)], 1);
        EXPECT_EQ(got[size_t(i)], philox_uniform(42, offset + uint64_t(i)))
            << "offset " << offset << " i " << i;
      }
    }
  }
}

TEST(Philox, UniformsLookUniform) {
  // 2^16 draws: the mean is within 5 sigma of 1/2 and each of 16 bins within 5 sigma of n/16.
  const int64_t n = 1 << 16;
  std::vector<int64_t> bins(16, 0);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float u = philox_uniform(7, uint64_t(i));
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    ++bins[size_t(u * 16)];
  }
  EXPECT_NEAR(sum / double(n), 0.5, 5 * std::sqrt(1.0 / 12 / double(n)));
  const double expect = double(n) / 16, sigma = std::sqrt(double(n) * (1.0 / 16) * (15.0 / 16));
  for (int64_t b : bins) EXPECT_NEAR(double(b), expect, 5 * sigma);
  // Different seeds give different streams.
  EXPECT_NE(philox_uniform(7, 0), philox_uniform(8, 0));
}

TEST(PhiloxGenerator, ReserveAdvancesTheOffsetAndStateRestores) {
  Generator gen(11);
  EXPECT_EQ(gen.state(), (RngState{11, 0}));
  EXPECT_EQ(gen.reserve(10), (RngState{11, 0}));
  EXPECT_EQ(gen.reserve(3), (RngState{11, 10}));
  EXPECT_EQ(gen.state(), (RngState{11, 13}));
  const RngState saved = gen.state();
  const std::vector<float> a = gen.uniform({5, 7}).to_vector<float>();
  EXPECT_EQ(gen.state().offset, 13u + 35u);
  const std::vector<float> b = gen.uniform({5, 7}).to_vector<float>();
  EXPECT_NE(a, b);
  gen.set_state(saved);
  EXPECT_EQ(gen.uniform({5, 7}).to_vector<float>(), a);
  for (int64_t i = 0; i < 35; ++i) EXPECT_EQ(a[size_t(i)], philox_uniform(11, 13 + uint64_t(i)));
  gen.manual_seed(12);
  EXPECT_EQ(gen.state(), (RngState{12, 0}));
}

TEST(PhiloxGenerator, UniformRangeDtypeAndMeta) {
  Generator gen(3);
  const Tensor t = gen.uniform({1000}, -2.0, 3.0, DType::bf16);
  EXPECT_EQ(t.dtype(), DType::bf16);
  for (double v : t.to_vector<double>()) {
    EXPECT_GE(v, -2.0);
    EXPECT_LE(v, 3.0);
  }
  const Tensor m = gen.uniform({4, 6}, 0, 1, DType::f16, Device::meta());
  EXPECT_EQ(m.shape(), (Shape{4, 6}));
  EXPECT_EQ(m.dtype(), DType::f16);
  EXPECT_EQ(m.device(), Device::meta());
  EXPECT_EQ(gen.state().offset, 1024u);
  EXPECT_THROW(gen.uniform({2}, 0, 1, DType::i32), Error);
  EXPECT_THROW(gen.uniform({2}, 1, 0), Error);
}

TEST(PhiloxGenerator, ConcurrentReservationsAreDisjoint) {
  Generator gen(5);
  std::vector<uint64_t> starts[2];
  std::vector<std::thread> threads;
  for (auto& s : starts)
    threads.emplace_back([&gen, &s] {
      for (int i = 0; i < 1000; ++i) s.push_back(gen.reserve(3).offset);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(gen.state().offset, 6000u);
  std::vector<bool> seen(2000, false);
  for (const auto& s : starts)
    for (uint64_t o : s) {
      ASSERT_EQ(o % 3, 0u);
      EXPECT_FALSE(seen[o / 3]);
      seen[o / 3] = true;
    }
}

TEST(PhiloxGenerator, SameNumbersForAnyThreadCount) {
#ifdef _OPENMP
  const int saved = omp_get_max_threads();
  Generator gen(9);
  omp_set_num_threads(1);
  const std::vector<float> one = gen.uniform({4099}).to_vector<float>();
  omp_set_num_threads(2);
  gen.set_state({9, 0});
  EXPECT_EQ(gen.uniform({4099}).to_vector<float>(), one);
  omp_set_num_threads(saved);
#else
  GTEST_SKIP() << "built without OpenMP";
#endif
}

TEST(PhiloxGenerator, DefaultGeneratorIsOneInstance) {
  EXPECT_EQ(&default_generator(), &default_generator());
}

}  // namespace
}  // namespace fitgrad
