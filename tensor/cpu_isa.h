// The instruction-set level the host's kernels run at, chosen once per process: what the
// CPU offers, lowered by the FITGRAD_CPU_ISA environment variable (Note [CPU ISA levels] in
// cpu_isa.cpp). A fact about the host, like device.h's, so it lives beside them in tensor/
// rather than in the CPU backend: the backend's kernels, tensor/quant's dequantization and
// the command line (which checks the variable first) all read it. Kernels with several variants (the 4-bit matvec and dequantization, the bf16
// GEMM, oneDNN's own kernels) ask cpu_isa() instead of testing CPU flags themselves, so one
// variable forces every lower path and one machine can test each path it can execute.
#pragma once

#include <optional>
#include <string_view>

namespace fitgrad {

// Ordered: each level includes the ones before it.
enum class CpuIsa {
  portable,     // compiler-vectorised code only (SSE2 on x86-64)
  avx2,         // AVX2 + FMA
  avx512,       // AVX-512 F, BW, VL and DQ (oneDNN's avx512_core)
  avx512_bf16,  // and the AVX512-BF16 dot products
  amx,          // and AMX's bf16 tiles (AMX-TILE, AMX-BF16, their state enabled by the OS)
};

// "portable", "avx2", "avx512", "avx512_bf16" or "amx".
const char* cpu_isa_name(CpuIsa isa);

// The level whose name is `name`; nullopt for an unknown name.
std::optional<CpuIsa> parse_cpu_isa(std::string_view name);

// The highest level this CPU (and its operating system) supports.
CpuIsa detected_cpu_isa();

// The level in force: `detected`, lowered to `requested` when that names a lower level. A
// null or empty request keeps `detected`; a higher one than detected is clamped to it (a
// machine runs only what it can). Throws an Error naming FITGRAD_CPU_ISA, the value and the
// accepted names for an unknown value.
CpuIsa choose_cpu_isa(CpuIsa detected, const char* requested);

// choose_cpu_isa(detected_cpu_isa(), getenv("FITGRAD_CPU_ISA")), computed on the first call.
CpuIsa cpu_isa();

// True when FITGRAD_CPU_ISA names a level (so third-party kernels are lowered too).
bool cpu_isa_forced();

inline bool cpu_isa_at_least(CpuIsa level) { return cpu_isa() >= level; }

// True when the CPU's vendor is Intel (CPUID's "GenuineIntel"); false elsewhere, and on
// compilers or targets that cannot ask. For choices the ISA level does not capture (Note
// [When oneDNN's bf16 matmul pays] in tensor/cpu/gemm_bf16.cpp).
bool cpu_is_intel();

}  // namespace fitgrad
