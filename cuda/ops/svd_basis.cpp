// The cuda table's svd_basis (GaLore's projection, optim/galore.h): the matrix goes to the
// host, the cpu table's svd_basis (Eigen) decomposes it there, and the basis comes back.
//
// Note [GaLore's SVD on a card]
// GaLore refreshes each projection by an SVD of the gradient every update_proj_gap (200)
// steps. cuSOLVER's gesvdj would do it on the card, but it needs device memory beyond the
// op's operands: a copy of the (m, n) matrix it overwrites, U (m, k) and V (n, k) for
// k = min(m, n) even in its economy mode, and a workspace whose size only the library can
// tell (gesvdj_bufferSize needs a handle). For Llama's (14336, 4096) MLP weights that is
// about 0.5 GB at the moment of the refresh, and memplan could not size it on meta for a
// card it does not have. The round trip through the host instead needs no device memory at
// all, so the ledger and memplan's plans stay exact, and the basis is bit for bit the cpu
// backend's, whose signs Note [Singular vector signs] fixes. The cost is time: the copies
// (the gradient's m n elements out, the basis's m r or r n back) and the host's SVD, once
// per parameter every update_proj_gap steps. Eigen runs at about 7 GFLOP/s of
// 4 m n min(m, n) on one core (bench/RESULTS.md, GaLore): 0.7-1.6 s for GPT-2's and
// quarter-Llama matrices, but about 40 s for a (4096, 4096) and 110 s for a (11008, 4096)
// matrix, so a Llama-7B refresh of its 224 matrices takes hours of host time, about a minute
// per step at the default gap of 200. That is the price of exact planning with this
// backend; cuSOLVER (gesvdj, with its workspace allocated and planned as a temporary) is the
// way to make large models' refreshes fast. The copies run in stream order (Note [Copies in
// stream order] in cuda/copy.cpp): the device-to-host one waits for the gradient, and the
// host-to-device one is ordered before every later kernel on the compute stream.
#include "cuda/copy.h"
#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

namespace fitgrad::cuda {
namespace {

void svd_basis(const backend::SvdBasisArgs& a) {
  FG_CHECK(a.a.defined() && a.out.defined() && a.a.numel() == a.m * a.n &&
               a.out.numel() == a.r * (a.left ? a.m : a.n),
           "[svd_basis] the cuda kernel takes a ({}, {}) matrix and its rank-{} basis", a.m, a.n,
           a.r);
  backend::SvdBasisArgs host = a;
  host.a = a.a.to(Device::cpu());
  host.out = Tensor::empty(a.out.shape(), a.out.dtype(), Device::cpu());
  backend::dispatch(backend::OpId::svd_basis, Device::cpu(), host);
  copy_bytes(a.out.data_ptr(), a.out.device(), host.out.data_ptr(), Device::cpu(),
             size_t(a.out.nbytes()));
}

// See Note [Registration at static initialisation] in cuda/raw_sources.cpp.
struct Registrar {
  Registrar() { backend::register_kernel(DeviceType::cuda, backend::OpId::svd_basis, svd_basis); }
};
const Registrar registrar;

}  // namespace
}  // namespace fitgrad::cuda
