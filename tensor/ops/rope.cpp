// RoPE front-ends (see rope.h): checks, the cos/sin table and dispatch through the kernels.
// The (2, T, D/2) table is a workspace (Category::temporary) allocated through the allocator, so the ledger sees
// it; it is B*H times smaller than x.
#include "tensor/ops/rope.h"

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/memory/scope.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {
namespace {

Tensor rotate(backend::OpId id, const Tensor& x, int64_t position_offset, const RopeParams& rope,
              const RopePositions& positions, bool inverse) {
  const char* op = backend::op_name(id);
  const char* name = inverse ? "dy" : "x";
  check_floating(op, name, x);
  check_dim(op, name, x, 4);
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), D = x.size(3);
  FG_CHECK(D > 0 && D % 2 == 0, "[{}] head dim D must be even and positive, got {} in shape {}", op,
           D, shape_str(x.shape()));
  FG_CHECK(position_offset >= 0, "[{}] position_offset = {} must be non-negative", op,
           position_offset);
  FG_CHECK(rope.theta > 0, "[{}] theta = {} must be positive", op, rope.theta);
  const RopeScaling& s = rope.scaling;
  FG_CHECK(s.type == RopeScaling::Type::none || s.factor >= 1,
           "[{}] the RoPE scaling factor {} must be at least 1", op, s.factor);
  FG_CHECK(s.type != RopeScaling::Type::llama3 ||
               (s.low_freq_factor > 0 && s.low_freq_factor < s.high_freq_factor &&
                s.original_max_position > 0),
           "[{}] llama3 RoPE scaling needs 0 < low_freq_factor ({}) < high_freq_factor ({}) and "
           "a positive original context ({})",
           op, s.low_freq_factor, s.high_freq_factor, s.original_max_position);
  FG_CHECK(s.type != RopeScaling::Type::longrope || s.pairs == D / 2,
           "[{}] longrope has factors for {} pairs; the head dim {} has {}", op, s.pairs, D, D / 2);
  const Tensor& ids = positions.ids;
  if (ids.defined()) {
    FG_CHECK(ids.dtype() == DType::i32 && ids.dim() == 2 && ids.size(0) == B && ids.size(1) == T &&
                 ids.is_contiguous() && ids.device() == x.device(),
             "[{}] positions must be contiguous ({}, {}) i32 on {}, got {} {} on {}", op, B, T,
             x.device().str(), dtype_name(ids.dtype()), shape_str(ids.shape()), ids.device().str());
    FG_CHECK(position_offset == 0 && positions.longest >= 1 && positions.longest <= T,
             "[{}] packed positions count from 0 within a row of {}: offset {}, longest {}", op, T,
             position_offset, positions.longest);
  }
  // The sequence's end, which picks longrope's list and dynamic NTK's base.
  RopeParams resolved = rope;
  resolved.scaling.sequence = double(ids.defined() ? positions.longest : position_offset + T);
  const Tensor xc = x.contiguous();  // (B, H, T, D), read natively
  Tensor table;                      // (2, T, D/2)
  {
    CategoryScope category(Category::temporary);
    table = Tensor::empty({2, T, D / 2}, DType::f32, x.device());
  }
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());  // (B, H, T, D)
  backend::dispatch(
      id, x.device(),
      backend::RopeArgs{B * H, T, D, position_offset, resolved, inverse, xc, table, y, ids, H});
  return y;
}

}  // namespace

Tensor rope(const Tensor& x, int64_t position_offset, const RopeParams& rope,
            const RopePositions& positions) {
  return rotate(backend::OpId::rope, x, position_offset, rope, positions, false);
}

Tensor rope_backward(const Tensor& dy, int64_t position_offset, const RopeParams& rope,
                     const RopePositions& positions) {
  return rotate(backend::OpId::rope_backward, dy, position_offset, rope, positions, true);
}

}  // namespace fitgrad::ops
