// The meta backend's kernel table: every op, doing nothing (Note [Kernel tables]). A meta
// tensor has an allocation but no bytes, so the front-end's allocations are the whole of a
// dry run; the kernel takes any argument struct and touches none of it.
#include "tensor/backend/kernel_table.h"

namespace fitgrad::backend {

void register_meta_kernels() {
  for (OpId op : all_ops())
    register_erased_kernel(DeviceType::meta, op, nullptr, [](const void*) {});
}

}  // namespace fitgrad::backend
