// The CPU's instruction-set level (see cpu_isa.h).
//
// Note [CPU ISA levels]
// fitgrad's binaries are built for baseline x86-64 (FITGRAD_NATIVE off) and choose their
// kernels when they run: the 4-bit kernels have AVX-512 and portable variants, the bf16 GEMM
// runs on oneDNN where its bf16 matmul exists (AVX-512; natively with AVX512-BF16) and is
// otherwise staged through the fp32 GEMM (Note [bf16 GEMM] in gemm_bf16.cpp). The level is
// read once, from the CPU (__builtin_cpu_supports, which also checks that the operating
// system saves the vector state; for AMX, CPUID and XCR0 as in amx_enabled below), and
// FITGRAD_CPU_ISA=portable|avx2|avx512|avx512_bf16|amx lowers it: every kernel that has a variant for a higher level then runs its lower one, and
// oneDNN is capped to the same level (dnnl_matmul.cpp), as its own DNNL_MAX_CPU_ISA would.
// The test suite runs the ISA-sensitive tests again under each lower level the machine can
// run (tests/CMakeLists.txt), so the portable 4-bit path is tested on an AVX-512 machine and
// the staged bf16 GEMM on any machine. A level above the CPU's is clamped, not refused, so the
// same test command works on every machine.
#include "tensor/cpu_isa.h"

#include <cstdlib>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif
#include <string>

#include "tensor/error.h"

namespace fitgrad {

namespace {

constexpr CpuIsa kLevels[] = {CpuIsa::portable, CpuIsa::avx2, CpuIsa::avx512, CpuIsa::avx512_bf16,
                              CpuIsa::amx};

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// Note [AMX level]
// AMX is its own level because oneDNN's bf16 matmul runs on its tiles there at about three
// times the rate of the AVX512-BF16 dot products (Note [When oneDNN's bf16 matmul pays] in
// tensor/cpu/gemm_bf16.cpp): FITGRAD_CPU_ISA=avx512_bf16 on an AMX machine caps oneDNN below
// AMX, so the suite tests both paths there (tests/CMakeLists.txt). fitgrad's own kernels
// issue no AMX instruction; oneDNN asks Linux for the tile state itself. The CPU has it when
// CPUID leaf 7 reports AMX-TILE (EDX bit 24) and AMX-BF16 (bit 22), and the operating system
// saves it when XCR0 has XTILECFG and XTILEDATA (bits 17 and 18).
bool amx_enabled() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  if (!(d & (1u << 24)) || !(d & (1u << 22))) return false;
  unsigned lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));  // OSXSAVE: implied by AVX-512's check
  return (lo & (3u << 17)) == (3u << 17);
}
#endif

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::portable: return "portable";
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::avx512: return "avx512";
    case CpuIsa::avx512_bf16: return "avx512_bf16";
    case CpuIsa::amx: return "amx";
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
  const bool avx512_bf16 = avx512 && __builtin_cpu_supports("avx512bf16");
  if (avx512_bf16 && amx_enabled()) return CpuIsa::amx;
  if (avx512_bf16) return CpuIsa::avx512_bf16;
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
