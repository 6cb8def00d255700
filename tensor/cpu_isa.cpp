// The CPU's instruction-set level (see cpu_isa.h).
//
// Note [CPU ISA levels]
// fitgrad's binaries are built for baseline x86-64 (FITGRAD_NATIVE off) and choose their
// kernels when they run: the 4-bit kernels have AVX-512 and portable variants, the bf16 GEMM
// runs on oneDNN where its bf16 matmul exists (AVX-512; natively with AVX512-BF16) and is
// otherwise staged through the fp32 GEMM (Note [bf16 GEMM] in gemm_bf16.cpp). The level is
// read once, from the CPU (__builtin_cpu_supports, which also checks that the operating
// system saves the vector state), and FITGRAD_CPU_ISA=portable|avx2|avx512|avx512_bf16 lowers
// it: every kernel that has a variant for a higher level then runs its lower one, and
// oneDNN is capped to the same level (dnnl_matmul.cpp), as its own DNNL_MAX_CPU_ISA would.
// The test suite runs the ISA-sensitive tests again under each lower level the machine can
// run (tests/CMakeLists.txt), so the portable 4-bit path is tested on an AVX-512 machine and
// the staged bf16 GEMM on any machine. A level above the CPU's is clamped, not refused, so the
// same test command works on every machine.
#include "tensor/cpu_isa.h"

#include <cstdlib>
#include <string>

#include "tensor/error.h"

namespace fitgrad {

namespace {

constexpr CpuIsa kLevels[] = {CpuIsa::portable, CpuIsa::avx2, CpuIsa::avx512, CpuIsa::avx512_bf16};

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::portable: return "portable";
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::avx512: return "avx512";
    case CpuIsa::avx512_bf16: return "avx512_bf16";
  }
  return "?";
}

std::optional<CpuIsa> parse_cpu_isa(std::string_view name) {
  for (CpuIsa level : kLevels)
    if (name == cpu_isa_name(level)) return level;
  return std::nullopt;
}

bool cpu_is_intel() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_is("intel");
#else
  return false;
#endif
}

CpuIsa detected_cpu_isa() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512dq");
  if (avx512 && __builtin_cpu_supports("avx512bf16")) return CpuIsa::avx512_bf16;
  if (avx512) return CpuIsa::avx512;
  if (avx2) return CpuIsa::avx2;
#endif
  return CpuIsa::portable;
}

CpuIsa choose_cpu_isa(CpuIsa detected, const char* requested) {
  if (requested == nullptr || *requested == '\0') return detected;
  const std::optional<CpuIsa> level = parse_cpu_isa(requested);
  if (!level) {
    std::string names;
    for (CpuIsa l : kLevels) names += std::string(names.empty() ? "" : ", ") + cpu_isa_name(l);
    throw Error(fmt::format("FITGRAD_CPU_ISA={} is not an instruction-set level (one of: {})",
                            requested, names));
  }
  return *level < detected ? *level : detected;
}

CpuIsa cpu_isa() {
  static const CpuIsa isa = choose_cpu_isa(detected_cpu_isa(), std::getenv("FITGRAD_CPU_ISA"));
  return isa;
}

bool cpu_isa_forced() {
  const char* requested = std::getenv("FITGRAD_CPU_ISA");
  return requested != nullptr && *requested != '\0';
}

}  // namespace fitgrad
