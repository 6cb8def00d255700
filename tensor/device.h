// Devices: `cpu`, `cuda:N` and `meta`. A meta tensor has a shape, a dtype and an
// allocation from the virtual raw source, but no bytes behind it (DESIGN.md, Core
// objects), so a dry run on meta makes the same allocations as the real run.
#pragma once

#include <string>
#include <string_view>

namespace fitgrad {

enum class DeviceType : uint8_t { cpu, cuda, meta };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;  // cuda's card; cpu:1 and meta:1 are far memory (train/activation_offload.h)

  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device meta() { return {DeviceType::meta, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::cuda, i}; }
  // Parses "cpu", "meta", "cuda" (= cuda:0) and "cuda:N".
  static Device parse(std::string_view text);

  std::string str() const;
  bool has_bytes() const { return type != DeviceType::meta; }
  bool operator==(const Device&) const = default;
};

}  // namespace fitgrad
