// Backend state that changes how an op computes, not what it computes: today the TF32
// matmul mode (DESIGN.md, Numerics), which every backend's GEMM reads (the CPU emulates it
// by rounding the operands). Front-ends and apps set it here, never in a backend.
#pragma once

namespace fitgrad::backend {

// Off by default. Thread-safe; the mode is process-wide, as torch's allow_tf32 is.
void set_matmul_tf32(bool on);
bool matmul_tf32();

// Sets the mode for a scope and restores the previous one on exit.
class MatmulTf32Scope {
 public:
  explicit MatmulTf32Scope(bool on) : before_(matmul_tf32()) { set_matmul_tf32(on); }
  ~MatmulTf32Scope() { set_matmul_tf32(before_); }
  MatmulTf32Scope(const MatmulTf32Scope&) = delete;
  MatmulTf32Scope& operator=(const MatmulTf32Scope&) = delete;

 private:
  bool before_;
};

}  // namespace fitgrad::backend
