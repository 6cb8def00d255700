// The strided walk shared by the CPU elementwise and reduction kernels. The op front-ends
// in tensor/ops/ resolve every operand to data, an offset and one stride per dim of a
// common shape (stride 0 for a broadcast dim) and collapse the dims; these helpers only
// walk that index space, in runs along the last dim, so the inner loops see one stride per
// operand. See Note [Elementwise parallel chunks].
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "tensor/shape.h"

namespace fitgrad::cpu {

// Calls run(offsets, count) for the runs along the last dim that cover the row-major flat
// index range [begin, end) of `shape` (at least one dim). offsets[k] is operand k's element
// offset at the run's first element, base[k] + index . strides[k]; the run then steps by
// the operand's last-dim stride.
template <size_t N, class Run>
void for_each_run(const Shape& shape, const std::array<const Strides*, N>& strides,
                  const std::array<int64_t, N>& base, int64_t begin, int64_t end, Run&& run) {
  const size_t ndim = shape.size();
  const size_t last = ndim - 1;
  int64_t small[8];  // the multi-index; on the heap only past 8 dims
  std::vector<int64_t> large;
  int64_t* index = small;
  if (ndim > 8) {
    large.resize(ndim);
    index = large.data();
  }
  std::array<int64_t, N> off = base;
  int64_t rest = begin;
  for (size_t d = ndim; d-- > 0;) {
    index[d] = rest % shape[d];
    rest /= shape[d];
    for (size_t k = 0; k < N; ++k) off[k] += index[d] * (*strides[k])[d];
  }
  for (int64_t pos = begin; pos < end;) {
    const int64_t count = std::min(shape[last] - index[last], end - pos);
    run(off, count);
    pos += count;
    index[last] += count;
    for (size_t k = 0; k < N; ++k) off[k] += count * (*strides[k])[last];
    // Carry into the outer dims (the final carry past dim 0 is harmless: pos == end).
    for (size_t d = last; d > 0 && index[d] == shape[d]; --d) {
      index[d] = 0;
      ++index[d - 1];
      for (size_t k = 0; k < N; ++k) off[k] += (*strides[k])[d - 1] - shape[d] * (*strides[k])[d];
    }
  }
}

// Note [Elementwise parallel chunks]
// An elementwise kernel splits the flat index space into fixed chunks of kChunk elements
// and hands whole chunks to OpenMP threads (schedule(static)). Every output element is
// computed by one thread from its own inputs only, so results do not depend on the thread
// count at all; the fixed chunk size keeps small tensors on one thread and gives long rows
// and many short rows the same granularity.
inline constexpr int64_t kChunk = 16384;

// for_each_run over the whole of `shape` (0-d included: one run of one element), chunked
// across threads. Nothing runs for an empty shape.
template <size_t N, class Run>
void parallel_runs(const Shape& shape, const std::array<const Strides*, N>& strides,
                   const std::array<int64_t, N>& base, Run&& run) {
  const int64_t n = numel(shape);
  if (n == 0) return;
  if (shape.empty()) {
    run(base, int64_t(1));
    return;
  }
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c)
    for_each_run(shape, strides, base, c * kChunk, std::min(n, (c + 1) * kChunk), run);
}

}  // namespace fitgrad::cpu
