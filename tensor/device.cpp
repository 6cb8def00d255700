// Device parsing and printing.
#include "tensor/device.h"

#include <charconv>

#include "tensor/error.h"

namespace fitgrad {

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "meta") return meta();
  if (text == "cuda") return cuda(0);
  if (text.starts_with("cuda:")) {
    std::string_view num = text.substr(5);
    int index = -1;
    auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), index);
    if (ec == std::errc() && end == num.data() + num.size() && index >= 0 && !num.empty())
      return cuda(index);
  }
  throw Error(
      fmt::format("[device] unknown device '{}' (expected cpu, meta, cuda or cuda:N)", text));
}

std::string Device::str() const {
  switch (type) {
    case DeviceType::cpu: return index == 0 ? "cpu" : fmt::format("cpu:{}", index);
    case DeviceType::meta: return index == 0 ? "meta" : fmt::format("meta:{}", index);
    case DeviceType::cuda: return fmt::format("cuda:{}", index);
  }
  return "?";
}

}  // namespace fitgrad
