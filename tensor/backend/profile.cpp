// Target profiles and workspace sizes (see profile.h).
#include "tensor/backend/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "tensor/backend/kernel_table.h"
#include "tensor/error.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace fitgrad::backend {
namespace {

std::mutex g_mutex;
TargetProfile& meta_target() {
  static TargetProfile target = host_cpu_profile();
  return target;
}

void check_cpu(const TargetProfile& profile, const char* what) {
  FG_CHECK(profile.backend == DeviceType::cpu, "[profile] {} has no size rule for a {} target",
           what, profile_name(profile));
}

}  // namespace

TargetProfile host_cpu_profile() {
#ifdef _OPENMP
  return cpu_profile(omp_get_max_threads(), backend_rules(DeviceType::cpu).bf16_gemm);
#else
  return cpu_profile(1, backend_rules(DeviceType::cpu).bf16_gemm);
#endif
}

TargetProfile cpu_profile(int threads, bool bf16_gemm) {
  FG_CHECK(threads >= 1, "[profile] a CPU target needs at least 1 thread, got {}", threads);
  return {DeviceType::cpu, threads, bf16_gemm};
}

std::string profile_name(const TargetProfile& profile) {
  switch (profile.backend) {
    case DeviceType::cpu:
      return fmt::format("cpu ({} thread{}{})", profile.threads, profile.threads == 1 ? "" : "s",
                         profile.bf16_gemm ? ", bf16 GEMM" : "");
    case DeviceType::cuda: return "cuda";
    case DeviceType::meta: break;
  }
  return "meta";
}

TargetProfile profile_for(Device device) {
  if (device.type == DeviceType::cuda) return {DeviceType::cuda, 1, false};
  if (device.type == DeviceType::cpu) return host_cpu_profile();
  std::lock_guard lock(g_mutex);
  return meta_target();
}

MetaTargetScope::MetaTargetScope(const TargetProfile& target) {
  FG_CHECK(target.backend != DeviceType::meta, "[profile] meta cannot plan for itself");
  std::lock_guard lock(g_mutex);
  before_ = meta_target();
  meta_target() = target;
}

MetaTargetScope::~MetaTargetScope() {
  std::lock_guard lock(g_mutex);
  meta_target() = before_;
}

int attention_threads(const TargetProfile& profile) {
  check_cpu(profile, "flash attention");
  return profile.threads;
}

int64_t flash_workspace_floats(const TargetProfile& profile, int64_t d, bool backward,
                               DType dtype) {
  const auto rule = backend_rules(profile.backend).flash_workspace_floats;
  FG_CHECK(rule != nullptr, "[profile] flash attention has no size rule for a {} target",
           profile_name(profile));
  return rule(d, backward, dtype != DType::f32);
}

int64_t naive_workspace_floats(const TargetProfile& profile, int64_t group, int64_t t, int64_t s,
                               int64_t d, bool backward, DType dtype) {
  const auto rule = backend_rules(profile.backend).naive_workspace_floats;
  FG_CHECK(rule != nullptr, "[profile] naive attention has no size rule for a {} target",
           profile_name(profile));
  return rule(group, t, s, d, backward, dtype != DType::f32);
}

int64_t gemm_workspace_floats(const TargetProfile& profile, DType dtype, int64_t m, int64_t n,
                              int64_t k, bool tf32) {
  if ((dtype == DType::f32 && !tf32) || (dtype == DType::bf16 && profile.bf16_gemm)) return 0;
  const auto rule = backend_rules(profile.backend).gemm_staging_floats;
  FG_CHECK(rule != nullptr, "[profile] a {} GEMM has no staging rule for a {} target",
           dtype_name(dtype), profile_name(profile));
  return rule(m, n, k);
}

int64_t sum_workspace_doubles(const TargetProfile& profile, const Shape& kept_shape,
                              const Strides& kept_strides, const Shape& reduced_shape) {
  const auto rule = backend_rules(profile.backend).sum_workspace_doubles;
  FG_CHECK(rule != nullptr, "[profile] sum has no workspace rule for a {} target",
           profile_name(profile));
  return rule(kept_shape, kept_strides, reduced_shape);
}

int64_t sum_squares_workspace_doubles(const TargetProfile& profile, int64_t n) {
  const auto rule = backend_rules(profile.backend).sum_squares_workspace_doubles;
  FG_CHECK(rule != nullptr, "[profile] sum_squares has no workspace rule for a {} target",
           profile_name(profile));
  return rule(n);
}

int64_t norm_partitions(const TargetProfile& profile, int64_t rows) {
  check_cpu(profile, "the norms");
  return std::max<int64_t>(1, std::min<int64_t>(profile.threads, rows));
}

}  // namespace fitgrad::backend
