// The GEMM libraries a CPU training step could run on, at the step's own shapes (issue 60):
// oneDNN's matmul (whichever oneDNN this file is compiled against: Debian's 2.6, or PyPI's
// 2026.1, whose C++ API is 3.x) and oneMKL's cblas_sgemm / cblas_gemm_bf16bf16f32 (loaded at
// run time from the path given, as the backend loads it). Not a CMake target:
// bench/gemm_libraries.sh compiles it once per oneDNN and runs the arms alternately.
//
//   gemm_libraries ARM DTYPE ROUNDS [MKL_RT]
//     ARM: dnnl (the oneDNN it was built with) or mkl;  DTYPE: f32 or bf16
//
// One line per shape: "RESULT arm=... lib=... dtype=... shape=... gflops=..." (best of ROUNDS
// after a warm-up; wall time, every thread the library uses). The shapes are one step of
// bench/compare_train_step.sh's model (GPT-2 style, 6 layers, d 384, T 256, batch 8: 2048 rows;
// a 50257-token head cut into 16384-column panels as the backend does) and of SmolLM2-135M
// (d 576, MLP 1536) at 1024 rows, forward and both backward products.
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

namespace {

struct Shape {
  const char* name;
  bool ta, tb;
  long m, n, k;
};

// (m,k) @ (k,n), op() as flagged: the forward is X W^T (weights stored (out, in)), dX = dY W,
// dW = dY^T X.
const Shape kShapes[] = {
    {"gpt_qkv_fwd", false, true, 2048, 1152, 384},
    {"gpt_qkv_dx", false, false, 2048, 384, 1152},
    {"gpt_qkv_dw", true, false, 1152, 384, 2048},
    {"gpt_fc_fwd", false, true, 2048, 1536, 384},
    {"gpt_fc_dx", false, false, 2048, 384, 1536},
    {"gpt_fc_dw", true, false, 1536, 384, 2048},
    {"gpt_proj_fwd", false, true, 2048, 384, 1536},
    {"gpt_proj_dw", true, false, 384, 1536, 2048},
    {"gpt_head_fwd", false, true, 2048, 16384, 384},
    {"gpt_head_dx", false, false, 2048, 384, 16384},
    {"gpt_head_dw", true, false, 16384, 384, 2048},
    {"smol_up_fwd", false, true, 1024, 1536, 576},
    {"smol_down_fwd", false, true, 1024, 576, 1536},
    {"smol_up_dw", true, false, 1536, 576, 1024},
};

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double best_gflops(const Shape& s, int rounds, const std::function<void()>& run) {
  run();
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    const double t0 = seconds();
    run();
    best = std::min(best, seconds() - t0);
  }
  return 2.0 * double(s.m) * double(s.n) * double(s.k) / best / 1e9;
}

// oneDNN: the product with transposes as strides, f32 or bf16 in, f32 out.
struct DnnlArm {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{eng};

  std::function<void()> product(const Shape& s, bool bf16, void* a, void* b, float* c) {
    using dnnl::memory;
    const auto t = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
    const memory::desc ad({s.m, s.k}, t, s.ta ? memory::dims{1, s.m} : memory::dims{s.k, 1});
    const memory::desc bd({s.k, s.n}, t, s.tb ? memory::dims{1, s.k} : memory::dims{s.n, 1});
    const memory::desc cd({s.m, s.n}, memory::data_type::f32, memory::dims{s.n, 1});
#if DNNL_VERSION_MAJOR >= 3
    const dnnl::matmul::primitive_desc pd(eng, ad, bd, cd);
#else
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), eng);
#endif
    auto prim = std::make_shared<dnnl::matmul>(pd);
    auto am = std::make_shared<memory>(ad, eng, a);
    auto bm = std::make_shared<memory>(bd, eng, b);
    auto cm = std::make_shared<memory>(cd, eng, c);
    return [this, prim, am, bm, cm] {
      prim->execute(stream, {{DNNL_ARG_SRC, *am}, {DNNL_ARG_WEIGHTS, *bm}, {DNNL_ARG_DST, *cm}});
      stream.wait();
    };
  }
};

// oneMKL through its single dynamic library, GNU OpenMP threading, LP64.
struct MklArm {
  using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
  using Bf16 = void (*)(int, int, int, int, int, int, float, const uint16_t*, int, const uint16_t*,
                        int, float, float*, int);
  Sgemm sgemm = nullptr;
  Bf16 bf16gemm = nullptr;
  std::string version;

  explicit MklArm(const char* path) {
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      std::fprintf(stderr, "gemm_libraries: cannot load %s: %s\n", path, dlerror());
      std::exit(1);
    }
    reinterpret_cast<int (*)(int)>(dlsym(h, "MKL_Set_Threading_Layer"))(3);  // GNU
    reinterpret_cast<int (*)(int)>(dlsym(h, "MKL_Set_Interface_Layer"))(0);  // LP64
    sgemm = reinterpret_cast<Sgemm>(dlsym(h, "cblas_sgemm"));
    bf16gemm = reinterpret_cast<Bf16>(dlsym(h, "cblas_gemm_bf16bf16f32"));
    char text[256] = {};
    reinterpret_cast<void (*)(char*, int)>(dlsym(h, "MKL_Get_Version_String"))(text, 255);
    version = text;
  }

  std::function<void()> product(const Shape& s, bool bf16, void* a, void* b, float* c) {
    const int ta = s.ta ? 112 : 111, tb = s.tb ? 112 : 111;
    const int lda = int(s.ta ? s.m : s.k), ldb = int(s.tb ? s.k : s.n);
    if (bf16)
      return [=, this] {
        bf16gemm(101, ta, tb, int(s.m), int(s.n), int(s.k), 1.0f, static_cast<uint16_t*>(a), lda,
                 static_cast<uint16_t*>(b), ldb, 0.0f, c, int(s.n));
      };
    return [=, this] {
      sgemm(101, ta, tb, int(s.m), int(s.n), int(s.k), 1.0f, static_cast<float*>(a), lda,
            static_cast<float*>(b), ldb, 0.0f, c, int(s.n));
    };
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || (std::strcmp(argv[1], "dnnl") != 0 && std::strcmp(argv[1], "mkl") != 0) ||
      (std::strcmp(argv[2], "f32") != 0 && std::strcmp(argv[2], "bf16") != 0) ||
      (std::strcmp(argv[1], "mkl") == 0 && argc < 5)) {
    std::fprintf(stderr, "usage: gemm_libraries dnnl|mkl f32|bf16 ROUNDS [MKL_RT]\n");
    return 1;
  }
  const bool mkl = std::strcmp(argv[1], "mkl") == 0, bf16 = std::strcmp(argv[2], "bf16") == 0;
  const int rounds = std::atoi(argv[3]);
  DnnlArm dnnl_arm;
  MklArm* mkl_arm = mkl ? new MklArm(argv[4]) : nullptr;
  std::string lib;
  if (mkl) {
    lib = mkl_arm->version.substr(0, mkl_arm->version.find(" Product"));
  } else {
    const dnnl_version_t* v = dnnl_version();
    lib = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
          std::to_string(v->patch) +
          (v->cpu_runtime == DNNL_RUNTIME_OMP   ? " (OpenMP)"
           : v->cpu_runtime == DNNL_RUNTIME_TBB ? " (TBB)"
           : v->cpu_runtime == DNNL_RUNTIME_SEQ ? " (sequential)"
                                                : " (SYCL)");
  }
  for (char& ch : lib)
    if (ch == ' ') ch = '_';
  for (const Shape& s : kShapes) {
    // Values in [-0.5, 0.5) (no subnormals); bf16 operands are their upper halves.
    std::vector<float> af(size_t(s.m * s.k)), bf(size_t(s.k * s.n)), c(size_t(s.m * s.n));
    for (size_t i = 0; i < af.size(); ++i) af[i] = float((i * 7 + 3) % 64) / 64.0f - 0.5f;
    for (size_t i = 0; i < bf.size(); ++i) bf[i] = float((i * 5 + 1) % 64) / 64.0f - 0.5f;
    std::vector<uint16_t> ah(af.size()), bh(bf.size());
    for (size_t i = 0; i < af.size(); ++i)
      std::memcpy(&ah[i], reinterpret_cast<char*>(&af[i]) + 2, 2);
    for (size_t i = 0; i < bf.size(); ++i)
      std::memcpy(&bh[i], reinterpret_cast<char*>(&bf[i]) + 2, 2);
    void* a = bf16 ? static_cast<void*>(ah.data()) : af.data();
    void* b = bf16 ? static_cast<void*>(bh.data()) : bf.data();
    const auto run =
        mkl ? mkl_arm->product(s, bf16, a, b, c.data()) : dnnl_arm.product(s, bf16, a, b, c.data());
    std::printf("RESULT arm=%s lib=%s dtype=%s shape=%s gflops=%.1f\n", argv[1], lib.c_str(),
                argv[2], s.name, best_gflops(s, rounds, run));
    std::fflush(stdout);
  }
  delete mkl_arm;
  return 0;
}
