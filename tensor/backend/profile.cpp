// Target profiles and workspace sizes (see profile.h).
#include "tensor/backend/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "tensor/backend/kernel_args.h"
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

// The backend's rule, or an error naming what has no rule on that target.
template <class Rule>
Rule rule_for(Rule rule, const char* what, const TargetProfile& profile) {
  FG_CHECK(rule != nullptr, "[profile] {} has no size rule for a {} target", what,
           profile_name(profile));
  return rule;
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
  return {DeviceType::cpu, threads, bf16_gemm, 0};
}

TargetProfile cuda_profile(int multiprocessors, int64_t gemm_workspace_bytes) {
  FG_CHECK(multiprocessors >= 1, "[profile] a CUDA target needs at least 1 multiprocessor, got {}",
           multiprocessors);
  FG_CHECK(gemm_workspace_bytes >= 0 && gemm_workspace_bytes % 4 == 0,
           "[profile] a GEMM workspace must be a non-negative multiple of 4 bytes, got {}",
           gemm_workspace_bytes);
  return {DeviceType::cuda, multiprocessors, true, gemm_workspace_bytes};
}

std::string profile_name(const TargetProfile& profile) {
  switch (profile.backend) {
    case DeviceType::cpu:
      return fmt::format("cpu ({} thread{}{})", profile.threads, profile.threads == 1 ? "" : "s",
                         profile.bf16_gemm ? ", bf16 GEMM" : "");
    case DeviceType::cuda:
      return fmt::format("cuda ({} SMs, {:.2f} MiB GEMM workspace)", profile.threads,
                         double(profile.gemm_workspace_bytes) / double(1 << 20));
    case DeviceType::meta: break;
  }
  return "meta";
}

namespace {

DeviceProfileFn& cuda_device_profile() {
  static DeviceProfileFn fn = nullptr;
  return fn;
}

}  // namespace

void register_device_profile(DeviceType type, DeviceProfileFn fn) {
  FG_CHECK(type == DeviceType::cuda, "[profile] only cuda registers a device profile, not {}",
           Device{type, 0}.str());
  cuda_device_profile() = fn;
}

TargetProfile profile_for(Device device) {
  if (device.type == DeviceType::cuda) {
    // Without the backend there is no cuda tensor to size; an H100 is the stand-in.
    const DeviceProfileFn fn = cuda_device_profile();
    return fn ? fn(device.index) : cuda_profile(132, 32 << 20);
  }
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

Shape flash_workspace_shape(const TargetProfile& profile, const AttentionShape& dims, bool backward,
                            DType dtype) {
  const auto rule =
      rule_for(backend_rules(profile.backend).flash_workspace, "flash attention", profile);
  return rule(profile, dims, backward, dtype);
}

int64_t flash_workspace_floats(const TargetProfile& profile, int64_t d, bool backward,
                               DType dtype) {
  check_cpu(profile, "flash attention's per-thread workspace");
  return flash_workspace_shape(profile, {1, 1, 1, 1, 1, d}, backward, dtype)[1];
}

int64_t naive_workspace_floats(const TargetProfile& profile, int64_t group, int64_t t, int64_t s,
                               int64_t d, bool backward, DType dtype) {
  const auto rule =
      rule_for(backend_rules(profile.backend).naive_workspace_floats, "naive attention", profile);
  return rule(profile, group, t, s, d, backward, dtype);
}

int64_t gemm_workspace_floats(const TargetProfile& profile, DType dtype, int64_t m, int64_t n,
                              int64_t k, bool tf32) {
  const auto rule =
      rule_for(backend_rules(profile.backend).gemm_workspace_floats, "a GEMM", profile);
  return rule(profile, dtype, m, n, k, tf32);
}

int64_t sum_workspace_doubles(const TargetProfile& profile, const Shape& kept_shape,
                              const Strides& kept_strides, const Shape& reduced_shape) {
  const auto rule = rule_for(backend_rules(profile.backend).sum_workspace_doubles, "sum", profile);
  return rule(profile, kept_shape, kept_strides, reduced_shape);
}

int64_t sum_squares_workspace_doubles(const TargetProfile& profile, int64_t n) {
  const auto rule = rule_for(backend_rules(profile.backend).sum_squares_workspace_doubles,
                             "sum_squares", profile);
  return rule(profile, n);
}

int64_t norm_partitions(const TargetProfile& profile, int64_t rows) {
  const auto rule = rule_for(backend_rules(profile.backend).norm_partitions, "the norms", profile);
  return rule(profile, rows);
}

int64_t svd_workspace_floats(const TargetProfile& profile, int64_t m, int64_t n, bool left) {
  const auto rule =
      rule_for(backend_rules(profile.backend).svd_workspace_floats, "svd_basis", profile);
  return rule(profile, m, n, left);
}

bool embedding_backward_pairs(const TargetProfile& profile, DType dtype) {
  return dtype != DType::f32 || backend_rules(profile.backend).embedding_sorts_f32;
}

bool cross_entropy_reads_in_place(const TargetProfile& profile, DType dtype) {
  return dtype == DType::f32 ||
         (dtype == DType::bf16 && backend_rules(profile.backend).cross_entropy_reads_bf16);
}

}  // namespace fitgrad::backend
