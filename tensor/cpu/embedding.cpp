// Embedding kernels (see embedding.h).
//
// Note [Deterministic embedding backward]
// Several positions may hold the same id, so their rows of dy add into one row of dw. The
// backward pass splits the C columns into blocks of 64 that run in parallel, and each block
// walks all n positions in order, adding its columns of dy[i] into dw[ids[i]]. Each element
// of dw is thus owned by one task and summed in position order: no atomics, no sort, and
// the result is bitwise the same for any thread count. The cost is that each block reads
// the id list once, which is small next to the n x C gradient.
#include "tensor/cpu/embedding.h"

#include <algorithm>
#include <cstring>

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

template void embedding_gather<int32_t>(const void*, const int32_t*, void*, int64_t, int64_t,
                                        size_t);
template void embedding_gather<int64_t>(const void*, const int64_t*, void*, int64_t, int64_t,
                                        size_t);
template void embedding_scatter_add_f32<int32_t>(const float*, const int32_t*, float*, int64_t,
                                                 int64_t, int64_t);
template void embedding_scatter_add_f32<int64_t>(const float*, const int64_t*, float*, int64_t,
                                                 int64_t, int64_t);

}  // namespace fitgrad::cpu
