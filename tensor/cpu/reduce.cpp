// The CPU reduction kernels (see cpu/reduce.h).
#include "tensor/cpu/reduce.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/cpu/elementwise_loop.h"
#include "tensor/error.h"

namespace fitgrad::cpu {
namespace {

// Note [Sum accumulation order]
// Sums accumulate in double: every f32 is exact in double and the 29 extra bits keep the
// rounding error of a sum far below one f32 ulp for any realistic length, so the f32
// result is (almost always) the correctly rounded true sum, with no pairwise tree or
// compensation needed. The order is fixed by the data, never by the threads: the reduced
// index space of each output, in row-major order, is cut into blocks of kBlock elements;
// each block is summed in order from 0.0, and the block sums are added in order from 0.0.
// The kernel either gives each thread whole outputs (many outputs) or gives threads
// (outputs, block) pairs and adds the partials afterwards (few outputs, e.g. a full sum),
// and it sums a tile of kTile neighbouring outputs together when they are contiguous (a
// sum over leading dims then streams rows instead of striding down columns). Every
// variant performs the same additions in the same order for each output, so a sum is
// bitwise identical run to run and for every thread count. A mean divides the double sum by the count and rounds
// once.
constexpr int64_t kBlock = 8192;
constexpr int64_t kTile = 64;

// Offset of kept index `o` (row-major over shape).
int64_t offset_of(int64_t o, const Shape& shape, const Strides& strides) {
  int64_t off = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    off += (o % shape[d]) * strides[d];
    o /= shape[d];
  }
  return off;
}

}  // namespace

void sum_f32(const Shape& kept_shape, const Strides& kept_strides, const Shape& reduced_shape,
             const Strides& reduced_strides, const float* a, double divisor, float* out) {
  const int64_t n_out = numel(kept_shape);
  const int64_t r = numel(reduced_shape);
  if (n_out == 0) return;
  if (r == 0) {
    for (int64_t o = 0; o < n_out; ++o) out[o] = float(0.0 / divisor);
    return;
  }
  // A 0-d reduced space is one element: give the walk one dim of size 1.
  const Shape red_shape = reduced_shape.empty() ? Shape{1} : reduced_shape;
  const Strides red_strides = reduced_shape.empty() ? Strides{0} : reduced_strides;
  const int64_t inner = red_strides.back();
  const int64_t blocks = (r + kBlock - 1) / kBlock;
  // Outputs go in tiles of consecutive indices along the last kept dim: kTile of them when
  // that dim is contiguous in `a` (a column sum then reads rows), else one.
  const int64_t last = kept_shape.empty() ? 1 : kept_shape.back();
  const int64_t width = !kept_shape.empty() && kept_strides.back() == 1 ? kTile : 1;
  const int64_t tiles_per_row = (last + width - 1) / width;
  const int64_t tiles = n_out / last * tiles_per_row;
  auto tile_first = [&](int64_t t) { return t / tiles_per_row * last + t % tiles_per_row * width; };
  auto tile_width = [&](int64_t t) { return std::min(width, last - t % tiles_per_row * width); };
  // acc[j] = the sum over block b of output tile_first(t) + j, in index order.
  auto block_sum = [&](int64_t t, int64_t b, double* acc) {
    const int64_t w = tile_width(t);
    const int64_t base = offset_of(tile_first(t), kept_shape, kept_strides);
    std::fill(acc, acc + w, 0.0);
    for_each_run<1>(red_shape, {&red_strides}, {base}, b * kBlock, std::min(r, (b + 1) * kBlock),
                    [&](const std::array<int64_t, 1>& off, int64_t count) {
                      const float* p = a + off[0];
                      if (w == 1 && inner == 1) {
                        for (int64_t i = 0; i < count; ++i) acc[0] += double(p[i]);
                        return;
                      }
                      for (int64_t i = 0; i < count; ++i, p += inner)
                        for (int64_t j = 0; j < w; ++j) acc[j] += double(p[j]);
                    });
  };
  if (blocks == 1 || tiles >= 64) {
#pragma omp parallel for schedule(static) if (n_out * r >= kChunk)
    for (int64_t t = 0; t < tiles; ++t) {
      double total[kTile] = {}, part[kTile];
      const int64_t w = tile_width(t);
      for (int64_t b = 0; b < blocks; ++b) {
        block_sum(t, b, part);
        for (int64_t j = 0; j < w; ++j) total[j] += part[j];
      }
      for (int64_t j = 0; j < w; ++j) out[tile_first(t) + j] = float(total[j] / divisor);
    }
    return;
  }
  std::vector<double> partial(size_t(tiles * blocks * width));  // (tiles, blocks, width)
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < tiles * blocks; ++i)
    block_sum(i / blocks, i % blocks, partial.data() + i * width);
  for (int64_t t = 0; t < tiles; ++t)
    for (int64_t j = 0; j < tile_width(t); ++j) {
      double total = 0.0;
      for (int64_t b = 0; b < blocks; ++b) total += partial[size_t((t * blocks + b) * width + j)];
      out[tile_first(t) + j] = float(total / divisor);
    }
}

// Note [Max picks the first maximum]
// max returns the first index that attains the maximum, so ties resolve the same way on
// every backend and max_backward routes the whole gradient to one element. NaN compares
// false with everything, so a plain `v > best` scan would skip it: instead the first NaN
// met becomes the result and ends the scan, as in PyTorch and NumPy.
void max_f32(const Shape& kept_shape, const Strides& kept_strides, int64_t size, int64_t stride,
             const float* a, float* values, int64_t* indices) {
  FG_ASSERT(size > 0);
  const int64_t n_out = numel(kept_shape);
#pragma omp parallel for schedule(static) if (n_out * size >= kChunk)
  for (int64_t o = 0; o < n_out; ++o) {
    const float* p = a + offset_of(o, kept_shape, kept_strides);
    float best = p[0];
    int64_t at = 0;
    for (int64_t i = 1; i < size && !std::isnan(best); ++i) {
      const float v = p[i * stride];
      if (v > best || std::isnan(v)) {
        best = v;
        at = i;
      }
    }
    values[o] = best;
    indices[o] = at;
  }
}

void max_backward_f32(const Shape& kept_shape, const Strides& kept_strides, int64_t size,
                      int64_t stride, const float* dy, const int64_t* indices, float* dx) {
  const int64_t n_out = numel(kept_shape);
  // One write per output: serial, so a bad index throws from this thread.
  for (int64_t o = 0; o < n_out; ++o) {
    const int64_t i = indices[o];
    FG_CHECK(i >= 0 && i < size,
             "[max_backward] index {} at position {} is out of range for a dim of size {}", i, o,
             size);
    dx[offset_of(o, kept_shape, kept_strides) + i * stride] = dy[o];
  }
}

}  // namespace fitgrad::cpu
