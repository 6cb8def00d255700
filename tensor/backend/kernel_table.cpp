// The kernel tables (Note [Kernel tables] in kernel_table.h).
#include "tensor/backend/kernel_table.h"

#include <array>
#include <atomic>
#include <mutex>

#include "tensor/error.h"
#include "tensor/interrupt.h"

namespace fitgrad::backend {
namespace {

struct Entry {
  ErasedKernel kernel;
  const std::type_info* args_type = nullptr;
};

constexpr size_t kDeviceTypes = 3;  // cpu, cuda, meta
using Table = std::array<Entry, kOpCount>;

struct Registry {
  std::mutex mutex;
  std::array<Table, kDeviceTypes> tables;
  std::array<BackendRules, kDeviceTypes> rules;
};

Registry& registry() {
  static Registry r;
  return r;
}

// The built-in tables, once; their registration takes the registry's mutex itself.
void ensure_builtin() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_cpu_kernels();
    register_meta_kernels();
    register_cuda_rules();
  });
}

}  // namespace

void register_erased_kernel(DeviceType type, OpId op, const std::type_info* args_type,
                            ErasedKernel kernel) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.tables[size_t(type)][size_t(op)] = Entry{std::move(kernel), args_type};
}

void register_backend_rules(DeviceType type, BackendRules rules) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.rules[size_t(type)] = rules;
}

const BackendRules& backend_rules(DeviceType type) {
  ensure_builtin();
  return registry().rules[size_t(type)];
}

bool has_kernel(DeviceType type, OpId op) {
  ensure_builtin();
  return bool(registry().tables[size_t(type)][size_t(op)].kernel);
}

void require_kernel(OpId op, Device device) {
  if (!has_kernel(device.type, op))
    throw Error(fmt::format("[{}] has no kernel on {}: its backend does not implement the op yet",
                            op_name(op), device.str()));
}

std::array<std::atomic<uint64_t>, kOpCount>& dispatches() {
  static std::array<std::atomic<uint64_t>, kOpCount> counts{};
  return counts;
}

uint64_t dispatch_count(OpId op) { return dispatches()[size_t(op)].load(); }

const ErasedKernel& find_kernel(OpId op, Device device, const std::type_info& args_type) {
  interruption_point();  // Note [Interruption points]: a step of any size stops when asked
  require_kernel(op, device);
  dispatches()[size_t(op)].fetch_add(1, std::memory_order_relaxed);
  const Entry& e = registry().tables[size_t(device.type)][size_t(op)];
  FG_ASSERT(e.args_type == nullptr || *e.args_type == args_type,
            "[{}] dispatched with {} but its {} kernel takes {}", op_name(op), args_type.name(),
            device.str(), e.args_type->name());
  return e.kernel;
}

}  // namespace fitgrad::backend
