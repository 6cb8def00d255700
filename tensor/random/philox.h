// Philox-4x32-10, the counter-based random number generator of DESIGN.md (Numerics), and
// the map from a draw index to a uniform float. A counter-based generator is a pure
// function of (key, counter): any element's random number is computed directly from the
// seed and its index, with no sequential state, so CPU threads, CUDA threads and a
// recompute during backward all draw the same numbers. tests/tensor/random/philox_test.cpp
// checks the block function against the Random123 known-answer vectors.
//
// Note [Philox streams]
// Draw j (a 64-bit index) of seed s is lane j % 4 of the block
//   philox4x32_10(counter = (lo32(j / 4), hi32(j / 4), 0, 0), key = (lo32(s), hi32(s))),
// and its uniform is (bits >> 8) * 2^-24, a multiple of 2^-24 in [0, 1), exact in f32.
// A Generator hands out disjoint ranges of draw indices (generator.h), so an op that
// reserved draws [offset, offset + n) gives element i the draw offset + i, whatever the
// thread count or device. Counter words 2 and 3 stay 0 for now; they are free for a future
// per-stream split.
#pragma once

#include <array>
#include <cstdint>

namespace fitgrad {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u;  // round multipliers
inline constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // Weyl key increments
inline constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;
inline constexpr int kPhiloxRounds = 10;

// The Philox-4x32 block function with 10 rounds: the key is bumped by the Weyl constants
// between rounds.
constexpr PhiloxCounter philox4x32_10(PhiloxCounter ctr, PhiloxKey key) {
  for (int round = 0; round < kPhiloxRounds; ++round) {
    if (round > 0) {
      key[0] += kPhiloxW0;
      key[1] += kPhiloxW1;
    }
    const uint64_t p0 = uint64_t(kPhiloxM0) * ctr[0];
    const uint64_t p1 = uint64_t(kPhiloxM1) * ctr[2];
    ctr = {uint32_t(p1 >> 32) ^ ctr[1] ^ key[0], uint32_t(p1), uint32_t(p0 >> 32) ^ ctr[3] ^ key[1],
           uint32_t(p0)};
  }
  return ctr;
}

// The block holding draws 4b .. 4b+3 of `seed` (Note [Philox streams]).
constexpr PhiloxCounter philox_block(uint64_t seed, uint64_t block) {
  return philox4x32_10({uint32_t(block), uint32_t(block >> 32), 0, 0},
                       {uint32_t(seed), uint32_t(seed >> 32)});
}

// A 32-bit draw as a uniform float in [0, 1): its top 24 bits times 2^-24.
constexpr float uniform_from_bits(uint32_t bits) { return float(bits >> 8) * 0x1p-24f; }

// Note [Philox lane by select]
// Word `lane` (0-3) of a block, chosen by comparisons rather than by indexing the array: on a
// card, an array indexed by a value known only at run time lives in local memory, and every
// flash kernel that draws dropout got a stack frame from it (the backward dQ kernel at head dim
// 128 also spilled: 24 bytes of stack, 16 stored and 44 loaded, under `nvcc -arch=sm_90
// -Xptxas -v`; bench/RESULTS.md, issue 46). The selects keep the four words in registers.
constexpr uint32_t philox_lane(const PhiloxCounter& bits, uint64_t lane) {
  return lane == 0 ? bits[0] : lane == 1 ? bits[1] : lane == 2 ? bits[2] : bits[3];
}

// The uniform of draw `index` of `seed`.
constexpr float philox_uniform(uint64_t seed, uint64_t index) {
  return uniform_from_bits(philox_lane(philox_block(seed, index / 4), index % 4));
}

// Calls fn(i, u) for the draws of Philox block `block` of `seed` that lie in [offset,
// offset + n), with i = draw - offset and u the draw's uniform.
template <class Fn>
constexpr void philox_block_for_each(uint64_t seed, uint64_t block, uint64_t offset, int64_t n,
                                     Fn&& fn) {
  const PhiloxCounter bits = philox_block(seed, block);
  for (uint64_t lane = 0; lane < 4; ++lane) {
    const uint64_t draw = block * 4 + lane;
    if (draw < offset || draw - offset >= uint64_t(n)) continue;
    fn(int64_t(draw - offset), uniform_from_bits(bits[lane]));
  }
}

// Calls fn(i, u) for i in [0, n) with u the uniform of draw offset + i of `seed`, one block
// per four draws, in order on the calling thread (for kernels that already run one tile per
// thread).
template <class Fn>
constexpr void philox_for_each_uniform_serial(uint64_t seed, uint64_t offset, int64_t n, Fn&& fn) {
  if (n <= 0) return;
  for (uint64_t b = offset / 4; b <= (offset + uint64_t(n) - 1) / 4; ++b)
    philox_block_for_each(seed, b, offset, n, fn);
}

// As philox_for_each_uniform_serial, in parallel over blocks. fn must only touch element i.
template <class Fn>
void philox_for_each_uniform(uint64_t seed, uint64_t offset, int64_t n, Fn&& fn) {
  if (n <= 0) return;
  const uint64_t first = offset / 4;
  const int64_t blocks = int64_t((offset + uint64_t(n) - 1) / 4 - first) + 1;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b)
    philox_block_for_each(seed, first + uint64_t(b), offset, n, fn);
}

}  // namespace fitgrad
