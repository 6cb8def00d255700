// The cuda table's matmul and linear through cuBLASLt: f32 (or TF32 when the op asks),
// bf16 and f16 with f32 accumulation and f32 scaling, linear's bias as the GEMM's epilogue,
// batched matmul as one strided-batched call (a batch stride of 0 broadcasts one matrix).
// The workspace is the op's temporary from the caching allocator, sized by the CUDA rules
// (Note [CUDA workspace rules]), so it is in the ledger and in memplan's plans.
//
// Note [Row-major GEMMs in cuBLASLt]
// fitgrad's matrices are row-major and cuBLASLt's column-major. A row-major (r, c) matrix
// with leading dimension ld is the column-major (c, r) matrix with the same ld, its
// transpose, so C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T:
// cuBLASLt's first operand is B's storage (transposed when trans_b), its second A's
// (transposed when trans_a), and the result is (n, m) with leading dimension n. A bias of
// length n is then per row of that result, which is what CUBLASLT_EPILOGUE_BIAS adds.
#include <cublasLt.h>

#include "cuda/ops/op_launch.h"
#include "tensor/backend/cuda_launch.h"
#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"

namespace fitgrad::cuda {
namespace {

[[noreturn]] void throw_cublas(cublasStatus_t status, const char* call) {
  throw Error(fmt::format("[cuda] {} failed: cuBLASLt status {}", call, int(status)));
}
#define FG_CUBLAS_CHECK(call)                                                      \
  do {                                                                             \
    const cublasStatus_t fg_status_ = (call);                                      \
    if (fg_status_ != CUBLAS_STATUS_SUCCESS)                                       \
      throw_cublas(fg_status_, #call " at " __FILE__ ":" FG_CUDA_LINE_(__LINE__)); \
  } while (0)

// One cuBLASLt handle per device, for the process's lifetime.
cublasLtHandle_t handle_of(int device) {
  return per_device_handle<cublasLtHandle_t>(
      device, [](cublasLtHandle_t* h) { FG_CUBLAS_CHECK(cublasLtCreate(h)); });
}

cudaDataType_t data_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    default: break;
  }
  throw Error(fmt::format("[matmul] cuBLASLt takes f32, bf16 or f16, got {}", dtype_name(dtype)));
}

struct Gemm {
  DType dtype = DType::f32;
  bool trans_a = false, trans_b = false, tf32 = false;
  int64_t batch = 1, m = 0, n = 0, k = 0, lda = 0, ldb = 0, stride_a = 0, stride_b = 0;
  const void *a = nullptr, *b = nullptr, *bias = nullptr;
  void* c = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// A matrix layout of `rows` x `cols`, column-major with leading dimension ld, batched.
class Layout {
 public:
  Layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
         int64_t stride) {
    FG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout_, type, uint64_t(rows), uint64_t(cols), ld));
    if (batch > 1) {
      const int32_t count = int32_t(batch);
      FG_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout_, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                       &count, sizeof(count)));
      FG_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          layout_, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    }
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(layout_); }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
  cublasLtMatrixLayout_t get() const { return layout_; }

 private:
  cublasLtMatrixLayout_t layout_ = nullptr;
};

void run_gemm(const Gemm& g, int device) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  OpLaunch launch(device);
  if (g.k == 0) {  // an empty product: zeros, which cuBLASLt does not take
    FG_CHECK(g.bias == nullptr, "[linear] a linear with 0 input features and a bias");
    FG_CUDA_CHECK(cudaMemsetAsync(g.c, 0, size_t(g.batch * g.m * g.n) * element_size(g.dtype),
                                  launch.stream()));
    return;
  }
  const cudaDataType_t type = data_type(g.dtype);
  const cublasComputeType_t compute =
      g.dtype == DType::f32 && g.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  cublasLtMatmulDesc_t desc = nullptr;
  FG_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
  struct DescGuard {
    cublasLtMatmulDesc_t d;
    ~DescGuard() { cublasLtMatmulDescDestroy(d); }
  } desc_guard{desc};
  // Note [Row-major GEMMs in cuBLASLt]: the first operand is B, the second A.
  const cublasOperation_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  FG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                                 sizeof(op_first)));
  FG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                                 sizeof(op_second)));
  if (g.bias) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    FG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                   sizeof(epilogue)));
    FG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                                   sizeof(g.bias)));
  }
  const Layout first(type, g.trans_b ? g.k : g.n, g.trans_b ? g.n : g.k, g.ldb, g.batch,
                     g.stride_b);
  const Layout second(type, g.trans_a ? g.m : g.k, g.trans_a ? g.k : g.m, g.lda, g.batch,
                      g.stride_a);
  const Layout out(type, g.n, g.m, g.n, g.batch, g.m * g.n);

  cublasLtMatmulPreference_t pref = nullptr;
  FG_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { cublasLtMatmulPreferenceDestroy(p); }
  } pref_guard{pref};
  FG_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &g.workspace_bytes, sizeof(g.workspace_bytes)));
  // Note [cuBLASLt alignment hints] in tensor/backend/cuda_launch.h.
  const int64_t bytes = int64_t(element_size(g.dtype));
  const uint32_t align_first = backend::cuda_operand_alignment(reinterpret_cast<uintptr_t>(g.b),
                                                               g.ldb, g.batch, g.stride_b, bytes),
                 align_second = backend::cuda_operand_alignment(reinterpret_cast<uintptr_t>(g.a),
                                                                g.lda, g.batch, g.stride_a, bytes),
                 align_c = backend::cuda_operand_alignment(reinterpret_cast<uintptr_t>(g.c), g.n,
                                                           g.batch, g.m * g.n, bytes);
  FG_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_first, sizeof(align_first)));
  FG_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_second, sizeof(align_second)));
  FG_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c)));
  FG_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof(align_c)));

  const cublasLtHandle_t handle = handle_of(device);
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  FG_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, desc, first.get(), second.get(), out.get(),
                                                 out.get(), pref, 1, &heuristic, &found));
  FG_CHECK(found > 0,
           "[matmul] cuBLASLt has no algorithm for a {} GEMM of ({} x {}) @ ({} x {}), batch {}",
           dtype_name(g.dtype), g.m, g.k, g.k, g.n, g.batch);
  const float alpha = 1.0f, beta = 0.0f;
  FG_CUBLAS_CHECK(cublasLtMatmul(handle, desc, &alpha, g.b, first.get(), g.a, second.get(), &beta,
                                 g.c, out.get(), g.c, out.get(), &heuristic.algo, g.workspace,
                                 g.workspace_bytes, launch.stream()));
}

void* workspace_of(const Tensor& w) { return w.defined() ? w.data_ptr() : nullptr; }
size_t workspace_bytes(const Tensor& w) { return w.defined() ? size_t(w.numel()) * 4 : 0; }

void matmul(const backend::MatmulArgs& a) {
  Gemm g;
  g.dtype = a.a.dtype();
  g.trans_a = a.trans_a;
  g.trans_b = a.trans_b;
  g.tf32 = a.tf32;
  g.batch = a.batch;
  g.m = a.m;
  g.n = a.n;
  g.k = a.k;
  g.lda = a.lda;
  g.ldb = a.ldb;
  g.stride_a = a.stride_a;
  g.stride_b = a.stride_b;
  g.a = a.a.data_ptr();
  g.b = a.b.data_ptr();
  g.c = a.c.data_ptr();
  g.workspace = workspace_of(a.workspace);
  g.workspace_bytes = workspace_bytes(a.workspace);
  run_gemm(g, a.c.device().index);
}

void linear(const backend::LinearArgs& a) {
  Gemm g;
  g.dtype = a.x.dtype();
  g.trans_b = true;
  g.tf32 = a.tf32;
  g.m = a.rows;
  g.n = a.out;
  g.k = a.in;
  g.lda = a.in;
  g.ldb = a.in;
  g.a = a.x.data_ptr();
  g.b = a.weight.data_ptr();
  g.bias = a.bias.defined() ? a.bias.data_ptr() : nullptr;
  g.c = a.y.data_ptr();
  g.workspace = workspace_of(a.workspace);
  g.workspace_bytes = workspace_bytes(a.workspace);
  run_gemm(g, a.y.device().index);
}

// See Note [Registration at static initialisation] in cuda/raw_sources.cpp.
struct Registrar {
  Registrar() {
    backend::register_kernel(DeviceType::cuda, backend::OpId::matmul, matmul);
    backend::register_kernel(DeviceType::cuda, backend::OpId::linear, linear);
  }
};
const Registrar registrar;

}  // namespace
}  // namespace fitgrad::cuda
