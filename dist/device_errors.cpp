// Device error records read over the ranks (device_errors.h, Note [Device errors over the
// ranks]).
#include "dist/device_errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "tensor/device_copy.h"
#include "tensor/error.h"
#include "tensor/memory/scope.h"

namespace fitgrad::dist {

namespace {

constexpr int64_t kMessageBytes = 512;  // of each rank's error; longer ones are cut

}  // namespace

void check_device_errors_over_ranks(ProcessGroup* group, Device device) {
  std::string mine;
  try {
    check_device_errors(device);
  } catch (const Error& e) {
    mine = e.what();
  }
  if (!group) {
    if (!mine.empty()) throw Error(mine);
    return;
  }
  const int world = group->size();
  const MemoryContextScope scope({Category::other, intern_label("dist.device_errors")});
  Tensor text = Tensor::zeros({kMessageBytes}, DType::u8, Device::cpu());  // (kMessageBytes)
  std::memcpy(text.data<uint8_t>(), mine.data(),
              size_t(std::min<int64_t>(int64_t(mine.size()), kMessageBytes)));
  // On the device before the output, so that a plan's ledger (where the host bytes are not
  // the device's) records the same allocations in the same order as a rank's.
  const Tensor shard = text.to(device);
  // (world * kMessageBytes): each rank's message, zero-padded, in rank order
  const Tensor all = Tensor::empty({world * kMessageBytes}, DType::u8, device);
  group->all_gather(shard, all);
  if (!device.has_bytes()) return;
  const Tensor host = all.to(Device::cpu());
  std::string ranks, errors;
  for (int k = 0; k < world; ++k) {
    const char* text = reinterpret_cast<const char*>(host.data<uint8_t>()) + k * kMessageBytes;
    const std::string message(text, strnlen(text, size_t(kMessageBytes)));
    if (message.empty()) continue;
    ranks += fmt::format("{}{}", ranks.empty() ? "" : ", ", k);
    errors += fmt::format("\n  rank {}: {}", k, message);
  }
  if (ranks.empty()) return;
  throw Error(fmt::format(
      "[dist] rank(s) {} of {} recorded indices out of range on the device (Note [Device error "
      "flags]): every rank stops before a checkpoint holds the update of the batches that "
      "skipped them{}",
      ranks, world, errors));
}

}  // namespace fitgrad::dist
