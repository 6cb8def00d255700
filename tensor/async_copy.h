// Copies that overlap compute (issue 27): a copy between a device and its far memory, started
// now on the device's copy stream and waited for later, at a point the caller chooses. The
// activation offload (train/activation_offload.h) moves the checkpointed blocks' inputs to
// the host with them and brings them back one block ahead of the recompute.
//
// Note [Copies retired in program order]
// An AsyncCopy owns its two tensors until wait(): the source cannot be freed or reused
// while the copy reads it, and the destination means nothing before wait(). On a card,
// start() queues the copy on the copy stream behind an event of the compute stream (so it
// reads what the kernels so far wrote), and wait() makes the compute stream wait for the
// copy's event: a stream wait, not a host wait, so the copy overlaps whatever the host
// queued in between. Only then does the copy release its tensors, in program order, on the
// compute stream. The allocations and frees therefore happen at the same points of the
// program on every device, and a dry run on meta plans the card's trace event for event
// whatever the copy's speed; a pinned host block released after a copy is held back until
// the compute stream is past it (Note [Pinned copies in flight] in tensor/device_copy.h).
// cpu and meta have no streams: there the copy runs inside wait(), as late as a stream could
// run it, and start() fills the destination with 0xFF bytes (NaN in every float dtype), so
// code that reads a destination before waiting, or writes a source while it is in flight,
// computes something visibly wrong on the CPU too, where the tests run.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace fitgrad {

// A backend's copy stream. `enqueue` queues `bytes` bytes from `src` to `dst` (one side a
// device of the backend, the other cpu) on the device's copy stream, after the work queued
// so far on its compute stream, and returns an event handle that is done when the copy is.
// `compute_wait` makes cuda:`index`'s compute stream wait for that event and releases it.
struct CopyStream {
  uint64_t (*enqueue)(void* dst, Device dst_device, const void* src, Device src_device,
                      size_t bytes) = nullptr;
  void (*compute_wait)(int index, uint64_t event) = nullptr;
};
// Registers the copy stream of `type` (cuda; never cpu or meta).
void register_copy_stream(DeviceType type, CopyStream stream);
// Whether a backend registered the copy stream of `type`.
bool has_copy_stream(DeviceType type);

class AsyncCopy {
 public:
  // Starts dst <- src. Both contiguous, of one shape and dtype; one side on a device of a
  // backend with a copy stream (or both on cpu, or both on meta).
  AsyncCopy(Tensor dst, Tensor src);
  // A copy still in flight is discarded: on a card the compute stream waits for it first.
  ~AsyncCopy();
  AsyncCopy(const AsyncCopy&) = delete;
  AsyncCopy& operator=(const AsyncCopy&) = delete;

  // The destination, holding the source's bytes for all later work; releases the source.
  Tensor wait();
  bool in_flight() const { return dst_.defined(); }

 private:
  Tensor dst_, src_;
  Device stream_device_;  // the side with a copy stream (cpu or meta: none)
  uint64_t event_ = 0;
};

}  // namespace fitgrad
