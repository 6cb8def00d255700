// Copies that overlap compute (see async_copy.h, Note [Copies retired in program order]).
#include "tensor/async_copy.h"

#include <cstring>
#include <map>
#include <mutex>

#include "tensor/device_copy.h"
#include "tensor/storage.h"

namespace fitgrad {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<DeviceType, CopyStream> streams;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: copies may outlive statics
  return *r;
}

CopyStream find_copy_stream(DeviceType type) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.streams.find(type);
  return it == r.streams.end() ? CopyStream{} : it->second;
}

// The side whose backend owns the copy: the non-cpu one (cpu when both are).
Device stream_side(const Tensor& dst, const Tensor& src) {
  return dst.device().type != DeviceType::cpu ? dst.device() : src.device();
}

}  // namespace

void register_copy_stream(DeviceType type, CopyStream stream) {
  FG_ASSERT(type == DeviceType::cuda, "only device backends register a copy stream");
  FG_ASSERT(stream.enqueue && stream.compute_wait, "a copy stream needs both of its calls");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.streams[type] = stream;
}

bool has_copy_stream(DeviceType type) { return find_copy_stream(type).enqueue != nullptr; }

AsyncCopy::AsyncCopy(Tensor dst, Tensor src)
    : dst_(std::move(dst)), src_(std::move(src)), stream_device_(stream_side(dst_, src_)) {
  FG_CHECK(dst_.shape() == src_.shape() && dst_.dtype() == src_.dtype(),
           "[async_copy] a copy needs one shape and dtype on both sides: {} {} into {} {}",
           shape_str(src_.shape()), dtype_name(src_.dtype()), shape_str(dst_.shape()),
           dtype_name(dst_.dtype()));
  FG_CHECK(dst_.is_contiguous() && src_.is_contiguous(),
           "[async_copy] both sides must be contiguous (source strides {}, destination {})",
           shape_str(src_.strides()), shape_str(dst_.strides()));
  const DeviceType type = stream_device_.type;
  FG_CHECK((dst_.device().type == DeviceType::meta) == (src_.device().type == DeviceType::meta),
           "[async_copy] a copy from {} to {} has bytes on one side only", src_.device().str(),
           dst_.device().str());
  dst_.storage()->bump_version();
  if (type == DeviceType::meta) return;
  if (type == DeviceType::cpu) {
    std::memset(dst_.data_ptr(), 0xFF, dst_.nbytes());
    return;
  }
  const CopyStream stream = find_copy_stream(type);
  FG_CHECK(stream.enqueue != nullptr, "[async_copy] {} has no copy stream: {}",
           stream_device_.str(), "fitgrad was built without its backend");
  event_ =
      stream.enqueue(dst_.data_ptr(), dst_.device(), src_.data_ptr(), src_.device(), dst_.nbytes());
}

Tensor AsyncCopy::wait() {
  FG_CHECK(in_flight(), "[async_copy] wait() on a copy that was already waited for");
  switch (stream_device_.type) {
    case DeviceType::meta: break;
    case DeviceType::cpu: std::memcpy(dst_.data_ptr(), src_.data_ptr(), dst_.nbytes()); break;
    case DeviceType::cuda: {
      const uint64_t event = event_;
      event_ = 0;
      find_copy_stream(stream_device_.type).compute_wait(stream_device_.index, event);
      // Note [Pinned copies in flight]: the compute stream is now past the copy.
      for (const Tensor* t : {&dst_, &src_})
        if (t->storage()->pinned()) t->storage()->record_stream(pinned_copy_stream(stream_device_));
      break;
    }
  }
  src_ = Tensor();
  Tensor out = std::move(dst_);
  dst_ = Tensor();
  return out;
}

AsyncCopy::~AsyncCopy() {
  // cpu and meta copies have not started: dropping them is enough.
  if (!in_flight() || stream_device_.type != DeviceType::cuda) return;
  try {
    wait();
  } catch (const std::exception&) {
    // The stream wait failed, so the device is in error: its next call reports that.
  }
}

}  // namespace fitgrad
