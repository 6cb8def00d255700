// The cuda table's svd_basis (GaLore's projection, optim/galore.h): the Gram matrix of the
// basis side on the card (cuda/kernels/svd.cu), cuSOLVER's symmetric eigensolver on it, and
// the top r eigenvectors signed and written into the output.
//
// Note [GaLore's SVD on a card]
// GaLore refreshes each projection by an SVD of the gradient every update_proj_gap (200)
// steps and keeps only one side's top r singular vectors: U's for a (m, n) weight with
// m < n, else V's. Those are the top r eigenvectors of the Gram matrix of that side, A A^T
// (m, m) or A^T A (n, n), whose eigenvalues are the squared singular values. So the card
// computes the Gram matrix in f32 and calls cuSOLVER's syevd on it instead of an SVD
// (gesvdj) of the matrix itself:
//   - memory: gesvdj overwrites a copy of the (m, n) matrix and returns U (m, k) and V
//     (n, k), k = min(m, n), beside its workspace; the Gram route holds one (d, d) matrix
//     for GaLore's d = min(m, n), which syevd overwrites with its eigenvectors, the d
//     eigenvalues and syevd's work array: 3 d^2 floats in all, 192 MiB for Llama's
//     d = 4096, once per refresh, one matrix at a time;
//   - time: the Gram matrix is one product (2 d^2 max(m, n) FLOPs) and syevd's cost depends
//     on d alone;
//   - accuracy: squaring the matrix squares its condition number, which loses the smallest
//     singular vectors, not the top r GaLore keeps, whose eigenvalues are the largest.
// Every buffer is one workspace from the caching allocator, sized by the CUDA rule
// (cuda_svd_layout in tensor/backend/cuda_launch.h, a temporary in the ledger), so memplan
// plans it on meta. The rule plans syevd's work array at LAPACK's documented minimum for
// ssyevd with eigenvectors; cuSOLVER says its own size only through a handle, so where it
// asks for more, the kernel takes a second temporary of that size, which the ledger shows
// and the plan lacks. Each vector's sign follows Note [Singular vector signs], as on the
// cpu, so both backends give one basis up to float rounding. A non-finite gradient, or an
// eigensolver that fails, is an Error, as on the cpu: the kernel reads back syevd's info
// and a flag the Gram kernel raises, which waits for the stream once per refresh.
//
// Written without a card at hand: it compiles in `make cuda-check`, and the backend ops test
// (tests/tensor/backend/backend_ops_test.cpp) compares it with the cpu kernel where a GPU is.
#include <cusolverDn.h>

#include "cuda/copy.h"
#include "cuda/kernels/svd_launch.h"
#include "cuda/ops/op_launch.h"
#include "tensor/backend/cuda_launch.h"
#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::cuda {
namespace {

#define FG_CUSOLVER_CHECK(call)                                                  \
  do {                                                                           \
    const cusolverStatus_t fg_status_ = (call);                                  \
    if (fg_status_ != CUSOLVER_STATUS_SUCCESS)                                   \
      throw Error(fmt::format("[svd_basis] {} failed: cuSOLVER status {}",       \
                              #call " at " __FILE__ ":" FG_CUDA_LINE_(__LINE__), \
                              int(fg_status_)));                                 \
  } while (0)

// One cuSOLVER handle per device, for the process's lifetime.
cusolverDnHandle_t handle_of(int device) {
  return per_device_handle<cusolverDnHandle_t>(
      device, [](cusolverDnHandle_t* h) { FG_CUSOLVER_CHECK(cusolverDnCreate(h)); });
}

void svd_basis(const backend::SvdBasisArgs& a) {
  const backend::CudaSvdLayout l = backend::cuda_svd_layout(a.m, a.n, a.left);
  FG_CHECK(a.a.defined() && a.out.defined() && a.a.numel() == a.m * a.n &&
               a.out.numel() == a.r * l.d && a.workspace.defined() &&
               a.workspace.dtype() == DType::f32 && a.workspace.numel() >= l.total,
           "[svd_basis] the cuda kernel takes a ({}, {}) matrix, its rank-{} basis and a "
           "workspace of {} floats",
           a.m, a.n, a.r, l.total);
  FG_CHECK(l.d <= 32767,
           "[svd_basis] the basis side of the ({}, {}) matrix has {} rows; cuSOLVER's syevd takes "
           "at most 32767 (its work array's length is a 32-bit int)",
           a.m, a.n, l.d);
  OpLaunch launch(a.a);
  const int device = a.a.device().index;
  float* ws = a.workspace.data<float>();
  float* gram = ws;
  float* eigenvalues = ws + l.eigenvalues;
  int* flags = reinterpret_cast<int*>(ws + l.flags);  // syevd's info, then the non-finite flag
  FG_CUDA_CHECK(cudaMemsetAsync(flags, 0, 2 * sizeof(int), launch.stream()));
  FG_CUDA_CHECK(launch_svd_gram(a.a.data_ptr(), a.a.dtype(), a.m, a.n, a.left, gram, flags + 1,
                                launch.stream()));

  cusolverDnHandle_t handle = handle_of(device);
  FG_CUSOLVER_CHECK(cusolverDnSetStream(handle, launch.stream()));
  const cusolverEigMode_t jobz = CUSOLVER_EIG_MODE_VECTOR;
  const cublasFillMode_t uplo = CUBLAS_FILL_MODE_LOWER;
  const int d = int(l.d);
  int lwork = 0;
  FG_CUSOLVER_CHECK(
      cusolverDnSsyevd_bufferSize(handle, jobz, uplo, d, gram, d, eigenvalues, &lwork));
  // See Note [GaLore's SVD on a card]: a larger request than the planned array is its own
  // temporary.
  float* work = ws + l.work;
  Tensor extra;
  if (int64_t(lwork) > l.work_floats) {
    extra = ops::f32_workspace(lwork, a.a.device());
    work = extra.data<float>();
  }
  FG_CUSOLVER_CHECK(
      cusolverDnSsyevd(handle, jobz, uplo, d, gram, d, eigenvalues, work, lwork, flags));
  int host_flags[2] = {0, 0};
  copy_bytes(host_flags, Device::cpu(), flags, a.a.device(), sizeof(host_flags));
  FG_CHECK(host_flags[1] == 0, "[svd_basis] the ({}, {}) matrix has a non-finite value", a.m, a.n);
  FG_CHECK(host_flags[0] == 0,
           "[svd_basis] cuSOLVER's syevd failed on the ({0}, {0}) Gram matrix of a ({1}, {2}) "
           "matrix: info {3}",
           l.d, a.m, a.n, host_flags[0]);
  FG_CUDA_CHECK(launch_svd_pick_basis(gram, l.d, a.r, a.left, a.out.data_ptr(), a.out.dtype(),
                                      launch.stream()));
}

// See Note [Registration at static initialisation] in cuda/raw_sources.cpp.
struct Registrar {
  Registrar() { backend::register_kernel(DeviceType::cuda, backend::OpId::svd_basis, svd_basis); }
};
const Registrar registrar;

}  // namespace
}  // namespace fitgrad::cuda
