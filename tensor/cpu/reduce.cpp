// The CPU reduction kernels (see cpu/reduce.h).
#include "tensor/cpu/reduce.h"

#include <algorithm>
#include <cmath>

#include "tensor/convert.h"
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
// bitwise identical run to run and for every thread count. A mean divides the double sum
// by the count and rounds once, to f32 and then to a bf16/f16 output (which, f32 carrying
// 13+ more bits than either, rounds like the double would for all but exact f32 ties).
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

// The tiling of one sum (Note [Sum accumulation order]): outputs go in tiles of
// consecutive indices along the last kept dim, kTile of them when that dim is contiguous in
// the input (a column sum then reads rows), else one; the reduced space goes in blocks.
struct SumPlan {
  int64_t n_out, r, blocks, last, width, tiles_per_row, tiles;
  SumPlan(const Shape& kept_shape, const Strides& kept_strides, const Shape& reduced_shape)
      : n_out(numel(kept_shape)),
        r(numel(reduced_shape)),
        blocks((r + kBlock - 1) / kBlock),
        last(kept_shape.empty() ? 1 : kept_shape.back()),
        width(!kept_shape.empty() && kept_strides.back() == 1 ? kTile : 1),
        tiles_per_row((last + width - 1) / width),
        tiles(last == 0 ? 0 : n_out / last * tiles_per_row) {}
  // Few tiles over many blocks: threads take (tile, block) pairs, whose partial sums need a
  // workspace of tiles x blocks x width doubles.
  bool split_blocks() const { return n_out > 0 && r > 0 && !(blocks == 1 || tiles >= 64); }
  int64_t tile_first(int64_t t) const {
    return t / tiles_per_row * last + t % tiles_per_row * width;
  }
  int64_t tile_width(int64_t t) const { return std::min(width, last - t % tiles_per_row * width); }
};

}  // namespace

int64_t sum_workspace_doubles(const Shape& kept_shape, const Strides& kept_strides,
                              const Shape& reduced_shape) {
  const SumPlan plan(kept_shape, kept_strides, reduced_shape);
  return plan.split_blocks() ? plan.tiles * plan.blocks * plan.width : 0;
}

template <class E>
void sum(const Shape& kept_shape, const Strides& kept_strides, const Shape& reduced_shape,
         const Strides& reduced_strides, const E* a, double divisor, E* out, double* partial) {
  const SumPlan plan(kept_shape, kept_strides, reduced_shape);
  const int64_t n_out = plan.n_out, r = plan.r, blocks = plan.blocks, width = plan.width;
  if (n_out == 0) return;
  if (r == 0) {
    for (int64_t o = 0; o < n_out; ++o) out[o] = convert<E>(float(0.0 / divisor));
    return;
  }
  // A 0-d reduced space is one element: give the walk one dim of size 1.
  const Shape red_shape = reduced_shape.empty() ? Shape{1} : reduced_shape;
  const Strides red_strides = reduced_shape.empty() ? Strides{0} : reduced_strides;
  const int64_t inner = red_strides.back();
  // acc[j] = the sum over block b of output tile_first(t) + j, in index order.
  auto block_sum = [&](int64_t t, int64_t b, double* acc) {
    const int64_t w = plan.tile_width(t);
    const int64_t base = offset_of(plan.tile_first(t), kept_shape, kept_strides);
    std::fill(acc, acc + w, 0.0);
    for_each_run<1>(red_shape, {&red_strides}, {base}, b * kBlock, std::min(r, (b + 1) * kBlock),
                    [&](const std::array<int64_t, 1>& off, int64_t count) {
                      const E* p = a + off[0];
                      if (w == 1 && inner == 1) {
                        for (int64_t i = 0; i < count; ++i) acc[0] += double(convert<float>(p[i]));
                        return;
                      }
                      for (int64_t i = 0; i < count; ++i, p += inner)
                        for (int64_t j = 0; j < w; ++j) acc[j] += double(convert<float>(p[j]));
                    });
  };
  auto result = [&](double total) { return convert<E>(float(total / divisor)); };
  if (!plan.split_blocks()) {
#pragma omp parallel for schedule(static) if (n_out * r >= kChunk)
    for (int64_t t = 0; t < plan.tiles; ++t) {
      double total[kTile] = {}, part[kTile];
      const int64_t w = plan.tile_width(t);
      for (int64_t b = 0; b < blocks; ++b) {
        block_sum(t, b, part);
        for (int64_t j = 0; j < w; ++j) total[j] += part[j];
      }
      for (int64_t j = 0; j < w; ++j) out[plan.tile_first(t) + j] = result(total[j]);
    }
    return;
  }
  // partial: (tiles, blocks, width), sum_workspace_doubles of them.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < plan.tiles * blocks; ++i)
    block_sum(i / blocks, i % blocks, partial + i * width);
  for (int64_t t = 0; t < plan.tiles; ++t)
    for (int64_t j = 0; j < plan.tile_width(t); ++j) {
      double total = 0.0;
      for (int64_t b = 0; b < blocks; ++b) total += partial[(t * blocks + b) * width + j];
      out[plan.tile_first(t) + j] = result(total);
    }
}

// Note [Max picks the first maximum]
// max returns the first index that attains the maximum, so ties resolve the same way on
// every backend and max_backward routes the whole gradient to one element. NaN compares
// false with everything, so a plain `v > best` scan would skip it: instead the first NaN
// met becomes the result and ends the scan, as in PyTorch and NumPy.
template <class E>
void max(const Shape& kept_shape, const Strides& kept_strides, int64_t size, int64_t stride,
         const E* a, E* values, int64_t* indices) {
  FG_ASSERT(size > 0);
  const int64_t n_out = numel(kept_shape);
#pragma omp parallel for schedule(static) if (n_out * size >= kChunk)
  for (int64_t o = 0; o < n_out; ++o) {
    const E* p = a + offset_of(o, kept_shape, kept_strides);
    float best = convert<float>(p[0]);  // exact: every E is exact in f32
    int64_t at = 0;
    for (int64_t i = 1; i < size && !std::isnan(best); ++i) {
      const float v = convert<float>(p[i * stride]);
      if (v > best || std::isnan(v)) {
        best = v;
        at = i;
      }
    }
    values[o] = p[at * stride];
    indices[o] = at;
  }
}

template <class E>
void max_backward(const Shape& kept_shape, const Strides& kept_strides, int64_t size,
                  int64_t stride, const E* dy, const int64_t* indices, E* dx) {
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

#define FITGRAD_REDUCE(E)                                                                         \
  template void sum(const Shape&, const Strides&, const Shape&, const Strides&, const E*, double, \
                    E*, double*);                                                                 \
  template void max(const Shape&, const Strides&, int64_t, int64_t, const E*, E*, int64_t*);      \
  template void max_backward(const Shape&, const Strides&, int64_t, int64_t, const E*,            \
                             const int64_t*, E*);
FITGRAD_REDUCE(float)
FITGRAD_REDUCE(BFloat16)
FITGRAD_REDUCE(Half)
#undef FITGRAD_REDUCE

}  // namespace fitgrad::cpu
