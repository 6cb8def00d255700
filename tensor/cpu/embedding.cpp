// Embedding kernels (see embedding.h).
//
// Note [Deterministic embedding backward]
// Several positions may hold the same id, so their rows of dy add into one row of dw. The
// backward pass splits the C columns into blocks of 64 that run in parallel, and each block
// walks all n positions in order, adding its columns of dy[i] into dw[ids[i]]. Each element
// of dw is thus owned by one task and summed in position order: no atomics, no sort, and
// the result is bitwise the same for any thread count. The cost is that each block reads
// the id list once, which is small next to the n x C gradient.
//
// Note [Low-precision embedding backward]
// A bf16 or f16 dw cannot hold the running sums, and an f32 (V, C) staging copy would be
// the size of the whole table in f32 (196 MiB for 50257 x 1024) to accumulate B*T rows. So
// the low-precision backward sorts the (id, position) pairs (n of them, in a workspace the
// front-end allocates), zeroes dw, and gives each run of equal ids to one task, which sums
// the run's dy rows in position order, 64 columns at a time in f32 registers, and rounds
// each element of dw once. The additions per element are the f32 kernel's, in its order,
// so the result is the f32 backward on the widened dy, rounded once, for any thread count.
#include "tensor/cpu/embedding.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "tensor/convert.h"
#include "tensor/error.h"

namespace fitgrad::cpu {
namespace {

// Columns of dw that one task of the backward pass owns: 64 floats, four cache lines.
constexpr int64_t kColumnBlock = 64;

template <class Id>
void check_ids(const Id* ids, int64_t n, int64_t V) {
  for (int64_t i = 0; i < n; ++i)
    FG_CHECK(ids[i] >= 0 && int64_t(ids[i]) < V,
             "[embedding] id {} at position {} is out of range for {} embeddings", int64_t(ids[i]),
             i, V);
}

}  // namespace

template <class Id>
void embedding_gather(const void* weight, const Id* ids, void* out, int64_t n, int64_t V,
                      size_t row_bytes) {
  check_ids(ids, n, V);
  const auto* w = static_cast<const std::byte*>(weight);
  auto* o = static_cast<std::byte*>(out);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(o + size_t(i) * row_bytes, w + size_t(ids[i]) * row_bytes, row_bytes);
}

template <class Id>
void embedding_scatter_add_f32(const float* dy, const Id* ids, float* dw, int64_t n, int64_t V,
                               int64_t C) {
  check_ids(ids, n, V);
  const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t c0 = k * kColumnBlock, c1 = std::min(C, c0 + kColumnBlock);
    for (int64_t v = 0; v < V; ++v) std::fill(dw + v * C + c0, dw + v * C + c1, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const float* src = dy + i * C;
      float* dst = dw + int64_t(ids[i]) * C;
      for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
    }
  }
}

template <class E, class Id>
void embedding_scatter_add_sorted(const E* dy, const Id* ids, E* dw, int64_t n, int64_t V,
                                  int64_t C, int64_t* pairs) {
  check_ids(ids, n, V);
#pragma omp parallel for schedule(static)
  for (int64_t v = 0; v < V; ++v) std::fill(dw + v * C, dw + (v + 1) * C, convert<E>(0.0f));
  auto* order = reinterpret_cast<std::array<int64_t, 2>*>(pairs);  // (n) of (id, position)
  for (int64_t i = 0; i < n; ++i) order[i] = {int64_t(ids[i]), i};
  std::sort(order, order + n);
  // Runs of one id: [start, next start); each is one task.
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0 && order[i - 1][0] == order[i][0]) continue;  // not the start of a run
    int64_t end = i + 1;
    while (end < n && order[end][0] == order[i][0]) ++end;
    E* dst = dw + order[i][0] * C;
    for (int64_t c0 = 0; c0 < C; c0 += kColumnBlock) {
      const int64_t width = std::min(kColumnBlock, C - c0);
      float acc[kColumnBlock] = {};
      for (int64_t r = i; r < end; ++r) {
        const E* src = dy + order[r][1] * C + c0;
        for (int64_t c = 0; c < width; ++c) acc[c] += convert<float>(src[c]);
      }
      for (int64_t c = 0; c < width; ++c) dst[c0 + c] = convert<E>(acc[c]);
    }
  }
}

template void embedding_gather<int32_t>(const void*, const int32_t*, void*, int64_t, int64_t,
                                        size_t);
template void embedding_gather<int64_t>(const void*, const int64_t*, void*, int64_t, int64_t,
                                        size_t);
template void embedding_scatter_add_f32<int32_t>(const float*, const int32_t*, float*, int64_t,
                                                 int64_t, int64_t);
template void embedding_scatter_add_f32<int64_t>(const float*, const int64_t*, float*, int64_t,
                                                 int64_t, int64_t);

#define FITGRAD_SORTED(E, Id)                                                                  \
  template void embedding_scatter_add_sorted<E, Id>(const E*, const Id*, E*, int64_t, int64_t, \
                                                    int64_t, int64_t*);
FITGRAD_SORTED(BFloat16, int32_t)
FITGRAD_SORTED(BFloat16, int64_t)
FITGRAD_SORTED(Half, int32_t)
FITGRAD_SORTED(Half, int64_t)
#undef FITGRAD_SORTED

}  // namespace fitgrad::cpu
