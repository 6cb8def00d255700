// How many devices of each type can be used right now, for code that must decide before it
// touches a device (a GPU test skips on it). tensor/ never includes a CUDA header
// (DESIGN.md), so cuda/ registers its device count here at startup, next to its raw
// sources; its count is 0 without a GPU or a usable driver. cpu and meta always have one
// device, a type that no backend registered has none, and a count that throws means none;
// device_count_problem says why (the CUDA error of cudaGetDeviceCount, say), so that a check
// that needs a card can print it (Note [Card tests cannot pass by skipping] in
// tests/card.h).
#pragma once

#include <functional>
#include <string>

#include "tensor/device.h"

namespace fitgrad {

// Returns the number of visible devices of the registering backend.
using DeviceCount = std::function<int()>;

// Registers (or replaces) the device count of `type` (cuda; never cpu or meta).
void register_device_count(DeviceType type, DeviceCount fn);
// 1 for cpu and meta; otherwise the registered count, or 0 when none is registered or it
// throws or is negative. Never throws.
int usable_device_count(DeviceType type) noexcept;
// Why usable_device_count(type) is 0: the registered count's exception message, or that no
// backend registered one; "" when the count is positive. Never throws.
std::string device_count_problem(DeviceType type) noexcept;

}  // namespace fitgrad
