// bitsandbytes' dynamic maps (see dynamic_map.h, Note [Dynamic map values]).
#include "tensor/quant/dynamic_map.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/error.h"

namespace fitgrad::quant {
namespace {

// torch.linspace(0.1, 1, n) in f32 as torch's CPU kernel computes it (the maps are built
// from torch's output): each element is start + step * j (first half) or end - step *
// (n - 1 - j) (second half) with one rounding, except inside its vectorised loop, which runs
// while 16 elements remain, two 8-lane vectors at a time: lane i of a vector is its first
// element plus f32(i * step).
std::vector<float> torch_linspace_f32(int64_t n) {
  const float start = 0.1f, end = 1.0f;
  const float step = (end - start) / float(n - 1);
  const int64_t halfway = n / 2;
  auto one = [&](int64_t j) {
    return j < halfway ? std::fma(step, float(j), start) : std::fma(-step, float(n - 1 - j), end);
  };
  constexpr int64_t kLanes = 8;
  std::vector<float> out(static_cast<size_t>(n));
  int64_t j = 0;
  for (; j + 2 * kLanes <= n; j += 2 * kLanes)
    for (int64_t v = j; v < j + 2 * kLanes; v += kLanes) {
      const float base = one(v);
      for (int64_t i = 0; i < kLanes; ++i) out[size_t(v + i)] = base + float(i) * step;
    }
  for (; j < n; ++j) out[size_t(j)] = one(j);
  return out;
}

CodeMap make_map(bool is_signed) {
  constexpr int kExponentBits = 7;
  std::vector<float> data;
  for (int i = 0; i < kExponentBits; ++i) {
    const int64_t n = is_signed ? (int64_t(1) << i) + 1 : (int64_t(1) << (i + 1)) + 1;
    const std::vector<float> b = torch_linspace_f32(n);
    // 10 ** (i - 6) as Python computes it, then an f32 operand of the tensor product.
    const float scale = float(std::pow(10.0, double(i - (kExponentBits - 1))));
    for (size_t j = 0; j + 1 < b.size(); ++j) {
      const float mean = (b[j] + b[j + 1]) / 2.0f;
      data.push_back(scale * mean);
      if (is_signed) data.push_back(-scale * mean);
    }
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  std::sort(data.begin(), data.end());
  CodeMap map{};
  for (size_t i = 0; i < map.size(); ++i) map[i] = data.at(i);
  return map;
}

}  // namespace

const CodeMap& dynamic_map_signed() {
  static const CodeMap map = make_map(true);
  return map;
}

const CodeMap& dynamic_map_unsigned() {
  static const CodeMap map = make_map(false);
  return map;
}

CodeSearch::CodeSearch(const CodeMap& map) : base_(size_t(1) << 16) {
  codes_[0] = -std::numeric_limits<float>::infinity();
  std::copy(map.begin(), map.end(), codes_.begin() + 1);
  codes_[257] = codes_[258] = std::numeric_limits<float>::infinity();
  for (uint32_t key = 0; key < (uint32_t(1) << 16); ++key) {
    if (((key >> 7) & 0xFF) == 0xFF) continue;  // inf and NaN: code() decides before
    const bool negative = key & 0x8000;
    // The bucket's smallest and largest floats (for negatives, the larger bit patterns).
    const float lo = std::bit_cast<float>(negative ? (key << 16) | 0xFFFF : key << 16);
    const float hi = std::bit_cast<float>(negative ? key << 16 : (key << 16) | 0xFFFF);
    const auto below = [&](float v) {
      return int(std::lower_bound(map.begin(), map.end(), v) - map.begin());
    };
    const int base = below(lo);
    FG_ASSERT(below(hi) + (std::binary_search(map.begin(), map.end(), hi) ? 1 : 0) - base <= 2,
              "a dynamic-map bucket holds more than two codes");
    base_[key] = uint8_t(std::min(base, 255));
  }
}

const CodeSearch& signed_search() {
  static const CodeSearch search(dynamic_map_signed());
  return search;
}

const CodeSearch& unsigned_search() {
  static const CodeSearch search(dynamic_map_unsigned());
  return search;
}

}  // namespace fitgrad::quant
