// Cross-entropy front-ends (see cross_entropy.h): checks, the walk over row chunks with f32
// staging where the kernels cannot read the logits in place, and one dispatch per chunk
// through the kernel table.
//
// Note [Cross-entropy chunking]
// f32 contiguous logits are read in place, and so are bf16 contiguous ones where the backend
// reads bf16 (backend::cross_entropy_reads_in_place; the CPU kernels widen them in registers
// and round the bf16 gradient once, Note [Cross-entropy on bf16 rows] in
// tensor/cpu/cross_entropy.cpp). Any other logits are staged one chunk of rows at a time
// into a single f32 scratch (rows, V), tagged Category::temporary, which the backward also
// reuses for the gradient before casting it into dlogits. So beyond the inputs the forward
// allocates (in order) an i64 copy of i32 targets (N), the loss (), lse (N), the statistics
// (two doubles) and, when staging, the scratch; the backward dlogits (N, V) in the logits'
// dtype and, when staging, the scratch. With bf16 logits read in place the backward's peak
// is N*V*2 bytes (plus the small vectors); staged (a backend without bf16 reads, or strided
// logits) it is N*V*2 + rows*V*4, against N*V*(2 + 4) for a convert-everything front-end.
// tests/tensor/ops/cross_entropy_test.cpp asserts both sums byte for byte. The loss is
// summed in double in row order across chunks, so every chunk size gives bitwise the same
// result, and the in-place bf16 path gives bitwise the staged path's.
//
// Note [Cross-entropy with every target ignored]
// The mean over zero rows is 0/0. PyTorch returns NaN, which poisons a whole training
// step when one micro-batch happens to be all padding; fitgrad returns a loss of 0 and a
// zero gradient instead, so such a micro-batch contributes nothing to the accumulated
// gradients. count() == 0 in the result tells the caller it happened.
//
// Note [Cross-entropy on meta]
// Without values there is no row walk; the front-ends allocate exactly as the real run does
// and stop before it, whose only allocations are views.
#include "tensor/ops/cross_entropy.h"

#include <algorithm>

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/backend/profile.h"
#include "tensor/memory/scope.h"
#include "tensor/ops/op_util.h"
#include "tensor/ops/optim_update.h"

namespace fitgrad::ops {
namespace {

constexpr int64_t kChunkBytes = int64_t(4) << 20;

struct Sizes {
  int64_t n = 0, v = 0;
};

Sizes check_logits_targets(const char* op, const Tensor& logits, const Tensor& targets) {
  check_floating(op, "logits", logits);
  FG_CHECK(targets.defined(), "[{}] targets is undefined", op);
  check_same_device(op, {&logits, &targets});
  check_dim(op, "logits", logits, 2);
  FG_CHECK(targets.dtype() == DType::i32 || targets.dtype() == DType::i64,
           "[{}] targets must be i32 or i64, got {}", op, dtype_name(targets.dtype()));
  const Sizes s{logits.size(0), logits.size(1)};
  check_shape(op, "targets", targets, {s.n});
  FG_CHECK(s.v >= 1, "[{}] logits {} have no classes", op, shape_str(logits.shape()));
  return s;
}

// One chunk of logit rows as the kernels read them: f32 (in place or staged), or bf16 in
// place when f32 is null.
struct ChunkRows {
  const float* f32 = nullptr;      // (n, V)
  const BFloat16* bf16 = nullptr;  // (n, V)
};

// The (N, V) logits one chunk of rows at a time: read in place when the kernels read their
// dtype and they are contiguous, else staged into one f32 scratch of `rows` rows.
class ChunkReader {
 public:
  ChunkReader(const Tensor& logits, int64_t rows)
      : logits_(logits),
        direct_(logits.is_contiguous() &&
                backend::cross_entropy_reads_in_place(backend::profile_for(logits.device()),
                                                      logits.dtype())) {
    if (direct_) return;
    CategoryScope category(Category::temporary);
    scratch_ = Tensor::empty({rows, logits.size(1)}, DType::f32, logits.device());
  }
  const Tensor& scratch() const { return scratch_; }
  // The rows [r0, r0 + n): in place, or staged into the scratch.
  ChunkRows rows(int64_t r0, int64_t n) {
    const int64_t offset = r0 * logits_.size(1);
    if (direct_ && logits_.dtype() == DType::f32) return {logits_.data<float>() + offset, nullptr};
    if (direct_) return {nullptr, logits_.data<BFloat16>() + offset};
    Tensor chunk = scratch_.narrow(0, 0, n);
    chunk.copy_(logits_.narrow(0, r0, n));
    return {chunk.data<float>(), nullptr};
  }

 private:
  Tensor logits_;  // (N, V)
  bool direct_;
  Tensor scratch_;  // (rows, V) f32 when not direct
};

}  // namespace

int64_t cross_entropy_default_chunk_rows(int64_t v) {
  return std::max<int64_t>(1, kChunkBytes / (std::max<int64_t>(v, 1) * 4));
}

int64_t CrossEntropyOut::count() const {
  if (!stats.device().has_bytes()) return lse.numel();
  return int64_t(read_double(stats, 1));
}

double CrossEntropyOut::nll_sum() const {
  if (!stats.device().has_bytes()) return 0.0;
  return read_double(stats, 0);
}

namespace {

// Rows [first_row, first_row + n) of out's N rows: logits (n, V), t64 (n) i64 contiguous.
void add_rows_i64(CrossEntropyOut& out, const Tensor& logits, const Tensor& t64, int64_t first_row,
                  int64_t ignore_index, int64_t chunk_rows) {
  const backend::OpId id = backend::OpId::cross_entropy;
  const int64_t n = logits.size(0), v = logits.size(1), total = out.lse.numel();
  const int64_t rows =
      std::min(n, chunk_rows > 0 ? chunk_rows : cross_entropy_default_chunk_rows(v));
  ChunkReader reader(logits, rows);
  // Note [Cross-entropy on meta]: no values to walk; the allocations are the real run's.
  if (!logits.device().has_bytes()) return;
  double* acc = doubles_in(out.stats);
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t m = std::min(rows, n - r0), row = first_row + r0;
    const ChunkRows x = reader.rows(r0, m);  // (m, V)
    backend::dispatch(
        id, logits.device(),
        backend::CrossEntropyArgs{.rows = m,
                                  .v = v,
                                  .ignore_index = ignore_index,
                                  .first_row = row,
                                  .x = x.f32,
                                  .x_bf16 = x.bf16,
                                  .targets = t64.data<int64_t>() + r0,
                                  .lse = out.lse.data<float>() + row,
                                  .stats = acc,
                                  .loss = row + m == total ? out.loss.data<float>() : nullptr});
  }
}

}  // namespace

CrossEntropyOut cross_entropy_begin(int64_t n, Device device) {
  FG_CHECK(n >= 0, "[cross_entropy] {} rows", n);
  Tensor loss = Tensor::empty({}, DType::f32, device);
  Tensor lse = Tensor::empty({n}, DType::f32, device);  // (N)
  // Note [Cross-entropy statistics on the device] in tensor/backend/kernel_args.h.
  Tensor stats = zero_doubles(2, device);  // (4) f32: NLL sum, count
  // Note [Cross-entropy with every target ignored]: no rows at all is a loss of 0 too.
  if (n == 0 && device.has_bytes()) loss.fill_(0.0);
  return {loss, lse, stats};
}

void cross_entropy_add_rows(CrossEntropyOut& out, const Tensor& logits, const Tensor& targets,
                            int64_t first_row, int64_t ignore_index, int64_t chunk_rows) {
  const backend::OpId id = backend::OpId::cross_entropy;
  const char* op = backend::op_name(id);
  const Sizes s = check_logits_targets(op, logits, targets);
  FG_CHECK(out.lse.defined() && out.stats.defined() && out.loss.defined(),
           "[{}] add_rows needs the tensors of cross_entropy_begin", op);
  check_same_device(op, {&logits, &out.lse});
  FG_CHECK(first_row >= 0 && first_row + s.n <= out.lse.numel(),
           "[{}] rows [{}, {}) are outside the {} rows begun", op, first_row, first_row + s.n,
           out.lse.numel());
  FG_CHECK(chunk_rows >= 0, "[{}] chunk_rows {} is negative", op, chunk_rows);
  backend::require_kernel(id, logits.device());
  add_rows_i64(out, logits, targets.to(DType::i64).contiguous(), first_row, ignore_index,
               chunk_rows);
}

CrossEntropyOut cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                              int64_t chunk_rows) {
  const backend::OpId id = backend::OpId::cross_entropy;
  const char* op = backend::op_name(id);
  const Sizes s = check_logits_targets(op, logits, targets);
  FG_CHECK(chunk_rows >= 0, "[{}] chunk_rows {} is negative", op, chunk_rows);
  backend::require_kernel(id, logits.device());
  const Tensor t64 = targets.to(DType::i64).contiguous();  // (N)
  CrossEntropyOut out = cross_entropy_begin(s.n, logits.device());
  add_rows_i64(out, logits, t64, 0, ignore_index, chunk_rows);
  return out;
}

Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& logits, const Tensor& targets,
                              const Tensor& lse, const Tensor& stats, int64_t ignore_index,
                              bool overwrite_logits, int64_t chunk_rows) {
  const backend::OpId id = backend::OpId::cross_entropy_backward;
  const char* op = backend::op_name(id);
  const Sizes s = check_logits_targets(op, logits, targets);
  FG_CHECK(dloss.defined() && dloss.dtype() == DType::f32,
           "[{}] dloss must be an f32 scalar, got {}", op,
           dloss.defined() ? dtype_name(dloss.dtype()) : "undefined");
  FG_CHECK(lse.defined(), "[{}] lse is undefined", op);
  FG_CHECK(
      stats.defined() && stats.dtype() == DType::f32 && stats.numel() == 4 && stats.is_contiguous(),
      "[{}] stats must be the (4) f32 statistics cross_entropy returned", op);
  check_same_device(op, {&logits, &dloss, &lse, &stats});
  check_shape(op, "dloss", dloss, {});
  check_shape(op, "lse", lse, {s.n});
  FG_CHECK(lse.dtype() == DType::f32, "[{}] lse must be f32, got {}", op, dtype_name(lse.dtype()));
  FG_CHECK(chunk_rows >= 0, "[{}] chunk_rows {} is negative", op, chunk_rows);
  backend::require_kernel(id, logits.device());
  const Tensor t64 = targets.to(DType::i64).contiguous();  // (N)
  const Tensor lse32 = lse.contiguous();                   // (N)
  const Tensor g = dloss.contiguous();                     // ()
  const bool in_place = overwrite_logits && logits.dtype() == DType::f32 && logits.is_contiguous();
  Tensor dlogits =
      in_place ? logits : Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  const int64_t rows =
      std::min(s.n, chunk_rows > 0 ? chunk_rows : cross_entropy_default_chunk_rows(s.v));
  ChunkReader reader(logits, rows);
  if (!logits.device().has_bytes()) return dlogits;  // Note [Cross-entropy on meta]
  const double* acc = doubles_in(stats);
  const bool f32_out = logits.dtype() == DType::f32;  // dlogits is fresh, so contiguous
  for (int64_t r0 = 0; r0 < s.n; r0 += rows) {
    const int64_t n = std::min(rows, s.n - r0);
    const ChunkRows x = reader.rows(r0, n);  // (n, V)
    backend::CrossEntropyBackwardArgs a{.rows = n,
                                        .v = s.v,
                                        .ignore_index = ignore_index,
                                        .first_row = r0,
                                        .dloss = g.data<float>(),
                                        .stats = acc,
                                        .x = x.f32,
                                        .x_bf16 = x.bf16,
                                        .lse = lse32.data<float>() + r0,
                                        .targets = t64.data<int64_t>() + r0};
    if (x.bf16)
      a.dx_bf16 = dlogits.data<BFloat16>() + r0 * s.v;
    else  // in place over the staged rows unless f32
      a.dx = f32_out ? dlogits.data<float>() + r0 * s.v : reader.scratch().data<float>();
    backend::dispatch(id, logits.device(), a);
    if (!f32_out && !x.bf16) dlogits.narrow(0, r0, n).copy_(reader.scratch().narrow(0, 0, n));
  }
  return dlogits;
}

}  // namespace fitgrad::ops
