// bitsandbytes' dynamic maps (see dynamic_map.h, Note [Dynamic map values]).
#include "tensor/quant/dynamic_map.h"

#include <algorithm>
#include <cmath>
#include <vector>

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

uint8_t quantize_code(const CodeMap& map, bool is_signed, float x) {
  int pivot = 127, upper_pivot = 255, lower_pivot = 0;
  float lower = is_signed ? -1.0f : 0.0f, upper = 1.0f;
  for (int step = 64; step > 0; step >>= 1) {
    const float val = map[size_t(pivot)];
    if (x > val) {
      lower_pivot = pivot;
      lower = val;
      pivot += step;
    } else {
      upper_pivot = pivot;
      upper = val;
      pivot -= step;
    }
  }
  const float val = map[size_t(pivot)];
  if (x > val) return uint8_t(x > (upper + val) * 0.5f ? upper_pivot : pivot);
  return uint8_t(x < (lower + val) * 0.5f ? lower_pivot : pivot);
}

}  // namespace fitgrad::quant
