// The CPU strided copy and fill kernels (see cpu/copy.h).
#include "tensor/cpu/copy.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

#include "tensor/convert.h"
#include "tensor/cpu/bf16_rows.h"
#include "tensor/cpu/elementwise_loop.h"
#include "tensor/error.h"

namespace fitgrad::cpu {

// Note [Copies in parallel runs]
// A copy walks the index space in the elementwise kernels' runs and chunks (Note
// [Elementwise parallel chunks] in elementwise_loop.h), so a large copy runs on every
// thread and a small one on the caller's. A run whose operands both step by one element is
// a memcpy for one dtype and a vector kernel for bf16 <-> f32 (bf16_rows.h: the same values
// as convert()); any other run converts element by element. Each element is written once
// from its own source, so the result does not depend on the thread count. This is the path
// of every cast (autocast's weight and activation casts, their gradients' way back, the
// cross-entropy's staged bf16 rows): a single-threaded scalar loop there took 14% of the bf16
// training step on an AMX Xeon (bench/RESULTS.md, issue 45).
void copy_strided(const Shape& shape, const StridedOperand& dst, const StridedOperand& src) {
  FG_ASSERT(dst.strides.size() == shape.size() && src.strides.size() == shape.size());
  if (numel(shape) == 0) return;
  dispatch_dtype(dst.dtype, [&](auto dst_tag) {
    dispatch_dtype(src.dtype, [&](auto src_tag) {
      using D = decltype(dst_tag);
      using S = decltype(src_tag);
      D* out = static_cast<D*>(dst.data);
      const S* in = static_cast<const S*>(src.data);
      const int64_t dst_step = shape.empty() ? 1 : dst.strides.back();
      const int64_t src_step = shape.empty() ? 1 : src.strides.back();
      const bool unit = dst_step == 1 && src_step == 1;
      parallel_runs<2>(
          shape, {&dst.strides, &src.strides}, {dst.offset, src.offset},
          [&](const std::array<int64_t, 2>& off, int64_t count) {
            D* o = out + off[0];
            const S* i = in + off[1];
            if constexpr (std::is_same_v<D, S>) {
              if (unit) {
                std::memcpy(static_cast<void*>(o), i, size_t(count) * sizeof(D));
                return;
              }
            } else if constexpr (std::is_same_v<D, float> && std::is_same_v<S, BFloat16>) {
              if (unit) return widen_bf16(i, count, o);
            } else if constexpr (std::is_same_v<D, BFloat16> && std::is_same_v<S, float>) {
              if (unit) return round_to_bf16(i, count, o);
            }
            for (int64_t e = 0; e < count; ++e) o[e * dst_step] = convert<D>(i[e * src_step]);
          });
    });
  });
}

void fill_strided(const Shape& shape, const StridedOperand& dst, double value) {
  FG_ASSERT(dst.strides.size() == shape.size());
  if (numel(shape) == 0) return;
  dispatch_dtype(dst.dtype, [&](auto tag) {
    using D = decltype(tag);
    const D v = convert<D>(value);
    D* out = static_cast<D*>(dst.data);
    const int64_t step = shape.empty() ? 1 : dst.strides.back();
    // Note [Copies in parallel runs]: a fill is a copy of one value.
    parallel_runs<1>(shape, {&dst.strides}, {dst.offset},
                     [&](const std::array<int64_t, 1>& off, int64_t count) {
                       if (step == 1) return void(std::fill_n(out + off[0], count, v));
                       for (int64_t e = 0; e < count; ++e) out[off[0] + e * step] = v;
                     });
  });
}

}  // namespace fitgrad::cpu
