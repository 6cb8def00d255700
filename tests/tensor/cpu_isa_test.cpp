// The CPU's instruction-set level (tensor/cpu_isa.h) against the kernel's own account of the
// CPU (/proc/cpuinfo's flags and vendor), FITGRAD_CPU_ISA's parsing and clamping, and what the level
// decides: no oneDNN bf16 matmul below AVX-512, and a oneDNN failure that names the product's
// shapes and oneDNN's reason (Note [oneDNN's bf16 matmul needs AVX-512]).
#include "tensor/cpu_isa.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tensor/cpu/dnnl_matmul.h"
#include "tensor/cpu/gemm_bf16.h"
#include "tensor/error.h"
#include "tensor/half.h"

namespace fitgrad::testing {
namespace {

// The flags of /proc/cpuinfo's first processor; empty where there is no such file.
std::set<std::string> cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

TEST(CpuIsa, DetectedLevelMatchesTheKernelsCpuFlags) {
  const std::set<std::string> f = cpuinfo_flags();
  if (f.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags to compare with";
  auto has = [&](const char* flag) { return f.count(flag) > 0; };
  CpuIsa want = CpuIsa::portable;
  if (has("avx2") && has("fma")) want = CpuIsa::avx2;
  if (want == CpuIsa::avx2 && has("avx512f") && has("avx512bw") && has("avx512vl") &&
      has("avx512dq"))
    want = CpuIsa::avx512;
  if (want == CpuIsa::avx512 && has("avx512_bf16")) want = CpuIsa::avx512_bf16;
  // Linux lists the AMX flags only where it enables their state (arch/x86: XFEATURE_XTILE).
  if (want == CpuIsa::avx512_bf16 && has("amx_bf16") && has("amx_tile")) want = CpuIsa::amx;
  EXPECT_EQ(cpu_isa_name(detected_cpu_isa()), std::string(cpu_isa_name(want)));
}

// The vendor against /proc/cpuinfo's vendor_id.
TEST(CpuIsa, TheVendorMatchesTheKernelsAccount) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("vendor_id", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string vendor;
    words >> vendor;
    EXPECT_EQ(cpu_is_intel(), vendor == "GenuineIntel") << vendor;
    return;
  }
  GTEST_SKIP() << "no vendor_id in /proc/cpuinfo to compare with";
}

TEST(CpuIsa, TheVariableLowersClampsAndRefusesUnknownNames) {
  EXPECT_EQ(choose_cpu_isa(CpuIsa::avx512, nullptr), CpuIsa::avx512);
  EXPECT_EQ(choose_cpu_isa(CpuIsa::avx512, ""), CpuIsa::avx512);
  EXPECT_EQ(choose_cpu_isa(CpuIsa::avx512_bf16, "avx2"), CpuIsa::avx2);
  EXPECT_EQ(choose_cpu_isa(CpuIsa::avx512, "portable"), CpuIsa::portable);
  EXPECT_EQ(choose_cpu_isa(CpuIsa::avx2, "avx512_bf16"), CpuIsa::avx2);  // clamped
  EXPECT_EQ(choose_cpu_isa(CpuIsa::amx, "avx512_bf16"), CpuIsa::avx512_bf16);
  for (const char* name : {"portable", "avx2", "avx512", "avx512_bf16", "amx"})
    EXPECT_EQ(cpu_isa_name(*parse_cpu_isa(name)), std::string(name));
  try {
    choose_cpu_isa(CpuIsa::avx2, "AVX512");
    FAIL() << "an unknown level was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("FITGRAD_CPU_ISA=AVX512 is not an instruction-set level "
                                         "(one of: portable, avx2, avx512, avx512_bf16, amx)"),
              std::string::npos)
        << e.what();
  }
}

// The level in force is the variable's (this test also runs under FITGRAD_CPU_ISA, see
// tests/CMakeLists.txt), never above the CPU's.
TEST(CpuIsa, TheLevelInForceFollowsTheVariable) {
  const char* requested = std::getenv("FITGRAD_CPU_ISA");
  EXPECT_EQ(cpu_isa(), choose_cpu_isa(detected_cpu_isa(), requested));
  EXPECT_LE(cpu_isa(), detected_cpu_isa());
  if (cpu_isa() < CpuIsa::avx512) {
    EXPECT_FALSE(cpu::gemm_bf16_available());
  }
}

// Where oneDNN has no bf16 matmul (below AVX-512, or capped there), calling it anyway is an
// error that names the product and oneDNN's reason, not oneDNN's bare message.
TEST(CpuIsa, AOneDnnFailureNamesTheProductAndTheReason) {
  if (!cpu::dnnl_available()) GTEST_SKIP() << "this build has no oneDNN";
  if (cpu::dnnl_bf16_matmul_available())
    GTEST_SKIP() << "oneDNN has a bf16 matmul here (ISA level " << cpu_isa_name(cpu_isa())
                 << "); FITGRAD_CPU_ISA=avx2 runs this test";
  const std::vector<BFloat16> a(15, BFloat16(1.0f)), b(35, BFloat16(1.0f));
  std::vector<float> c(21);
  try {
    cpu::dnnl_matmul(false, true, 3, 7, 5, DType::bf16, a.data(), 5, b.data(), 5, nullptr, 1.0f,
                     0.0f, DType::f32, c.data(), 7, 1);
    FAIL() << "oneDNN ran a bf16 matmul it said it does not have";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("bf16 product (3, 5) @ (7, 5)^T -> f32 (3, 7)"), std::string::npos) << m;
    EXPECT_NE(m.find("could not create a primitive"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace fitgrad::testing
