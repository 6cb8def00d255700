// Where a declared state tensor lives and what it costs (see state_spec.h).
#include "optim/state_spec.h"

namespace fitgrad::optim {

Device state_device(const StateSpec& spec, Device param_device) {
  if (spec.placement == StatePlacement::with_param || param_device.type == DeviceType::meta)
    return param_device;
  return Device::cpu();
}

int64_t state_bytes(const std::vector<StateSpec>& specs) {
  int64_t bytes = 0;
  for (const StateSpec& s : specs) bytes += numel(s.shape) * int64_t(element_size(s.dtype));
  return bytes;
}

}  // namespace fitgrad::optim
