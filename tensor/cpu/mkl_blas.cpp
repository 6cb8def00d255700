// oneMKL's GEMMs, loaded at run time (see mkl_blas.h).
//
// Note [oneMKL at run time]
// oneMKL is not a Debian package of the main archive, and its licence (the Intel Simplified
// Software License) is not the project's, so a build neither needs it nor links it: the
// first question dlopens libmkl_rt (oneMKL's single dynamic library, which loads the rest of
// oneMKL from its own folder) and takes the few functions the backend calls by name. Looked
// for, in order: FITGRAD_MKL (a libmkl_rt file, or a folder holding one), the build's own
// prefix (FITGRAD_MKL_DIR: the checkout's .deps/mkl/lib, which tools/install-deps.sh fills
// from PyPI's `mkl` wheel), then the loader's search path. RTLD_LOCAL keeps its cblas_sgemm
// from being mixed with OpenBLAS's of the same name, which the binary links.
//
// Before any other call, three settings that must come first: the threading layer is GNU
// OpenMP (libgomp, the runtime every other CPU kernel runs on, so one thread budget holds,
// Note [One thread budget] in gemm.cpp; oneMKL would otherwise load Intel's libiomp5), the
// interface is LP64 (32-bit MKL_INT, the cblas declarations below), and under FITGRAD_CPU_ISA
// oneMKL's dispatch is capped at the same level (Note [CPU ISA levels] in cpu_isa.cpp), so
// one variable lowers every library. Each call sets the thread count for the calling thread
// only (mkl_set_num_threads_local) and restores it.
//
// Reproducibility: oneMKL's sgemm splits the output over threads and gives bitwise-equal
// results for a fixed shape, thread count and CPU, as oneDNN's does (gemm_test's
// TwoRunsAreBitwiseEqual runs on it too). oneMKL's workspace is its own, outside the ledger,
// like oneDNN's and OpenBLAS's.
#include "tensor/cpu/mkl_blas.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "tensor/cpu_isa.h"
#include "tensor/error.h"

namespace fitgrad::cpu {
namespace {

// oneMKL's C interface, as its headers declare it (LP64: MKL_INT is int); the enums are
// CBLAS's published values.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
constexpr int kThreadingGnu = 3, kInterfaceLp64 = 0;
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
using IntFn = int (*)(int);
using VersionFn = void (*)(char*, int);

struct Mkl {
  void* handle = nullptr;
  SgemmFn sgemm = nullptr;
  IntFn set_num_threads_local = nullptr;
  std::string description;
};

// oneMKL's instruction-set cap for a forced fitgrad level (its MKL_ENABLE_* values).
int mkl_isa_cap(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::portable: return 0;     // MKL_ENABLE_SSE4_2
    case CpuIsa::avx2: return 2;         // MKL_ENABLE_AVX2
    case CpuIsa::avx512: return 6;       // MKL_ENABLE_AVX512_E1: AVX-512 with VNNI
    case CpuIsa::avx512_bf16: return 8;  // MKL_ENABLE_AVX512_E3: and bfloat16
    case CpuIsa::amx: return 9;          // MKL_ENABLE_AVX512_E4: and AMX
  }
  return 9;
}

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The files to try for a folder or a file named by the user or the build.
std::vector<std::string> candidates(const std::string& place) {
  if (!is_dir(place)) return {place};
  return {place + "/libmkl_rt.so.3", place + "/libmkl_rt.so.2", place + "/libmkl_rt.so"};
}

// dlopens the first candidate that loads; "" and the reasons when none does.
void* open_first(const std::vector<std::string>& files, std::string& opened, std::string& why) {
  for (const std::string& f : files) {
    if (void* h = ::dlopen(f.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      opened = f;
      return h;
    }
    const char* err = ::dlerror();
    why += fmt::format("{}{}", why.empty() ? "" : "; ", err ? err : f);
  }
  return nullptr;
}

Mkl load() {
  Mkl mkl;
  std::vector<std::string> files;
  if (const char* user = std::getenv("FITGRAD_MKL"); user && *user) {
    files = candidates(user);
  } else {
#ifdef FITGRAD_MKL_DIR
    files = candidates(FITGRAD_MKL_DIR);
#endif
    files.insert(files.end(), {"libmkl_rt.so.3", "libmkl_rt.so.2"});
  }
  std::string opened, why;
  mkl.handle = open_first(files, opened, why);
  if (!mkl.handle) {
    mkl.description = fmt::format("oneMKL not found ({})", why);
    return mkl;
  }
  auto sym = [&](const char* name) { return ::dlsym(mkl.handle, name); };
  auto threading = reinterpret_cast<IntFn>(sym("MKL_Set_Threading_Layer"));
  auto interface = reinterpret_cast<IntFn>(sym("MKL_Set_Interface_Layer"));
  auto enable = reinterpret_cast<IntFn>(sym("MKL_Enable_Instructions"));
  auto version = reinterpret_cast<VersionFn>(sym("MKL_Get_Version_String"));
  mkl.sgemm = reinterpret_cast<SgemmFn>(sym("cblas_sgemm"));
  mkl.set_num_threads_local = reinterpret_cast<IntFn>(sym("MKL_Set_Num_Threads_Local"));
  if (!threading || !interface || !enable || !version || !mkl.sgemm || !mkl.set_num_threads_local) {
    mkl.description = fmt::format("{} lacks oneMKL's functions (not a libmkl_rt?)", opened);
    ::dlclose(mkl.handle);
    mkl.handle = nullptr;
    return mkl;
  }
  threading(kThreadingGnu);
  interface(kInterfaceLp64);
  if (cpu_isa_forced()) enable(mkl_isa_cap(cpu_isa()));
  std::array<char, 256> text{};
  version(text.data(), int(text.size()));
  std::string v(text.data());
  // "Intel(R) oneAPI Math Kernel Library Version 2026.2-Product Build ..." -> "2026.2".
  if (const auto at = v.find("Version "); at != std::string::npos) {
    v = v.substr(at + 8);
    v = v.substr(0, v.find_first_of("- "));
  }
  mkl.description = fmt::format("oneMKL {} ({})", v, opened);
  return mkl;
}

const Mkl& mkl() {
  static const Mkl m = load();
  return m;
}

}  // namespace

bool mkl_available() { return mkl().handle != nullptr; }

std::string mkl_description() { return mkl().description; }

void mkl_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
               int64_t ldc, int threads) {
  const Mkl& lib = mkl();
  FG_CHECK(lib.handle, "[gemm] the mkl backend is not loaded: {}", lib.description);
  FG_CHECK(std::max({m, n, k, lda, ldb, ldc}) <= int64_t(INT_MAX),
           "[gemm] a size of ({}, {}, {}) passes oneMKL's 32-bit MKL_INT", m, n, k);
  const int saved = lib.set_num_threads_local(threads);
  lib.sgemm(kRowMajor, trans_a ? kTrans : kNoTrans, trans_b ? kTrans : kNoTrans, int(m), int(n),
            int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
  lib.set_num_threads_local(saved);
}

}  // namespace fitgrad::cpu
