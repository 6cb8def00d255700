// Activation offload (issue 15): the saved-tensor hooks (Note [Saved tensor hooks] in
// autograd/node.h) that move what the forward saves for backward to host memory and back.
//
// Note [Activation offload]
// With gradient checkpointing the forward keeps, outside its recomputed segments, each
// segment's input and what the head and the loss save: activations the device holds from
// the forward to the backward. Under these hooks each saved tensor whose bytes are in the
// activation category of the compute device is copied to the host (pinned memory on a real
// card; meta:1, planned host memory, on meta: optim::offload_host) and the device copy is
// released as soon as nothing else holds it; backward unpacks it to the device again just
// before its rule runs. Parameters and other saved tensors (ids, a frozen base) stay. The
// recompute inside backward saves on the device as usual, since the hooks are only in force
// during the forward. The copies are synchronous for now: they do not yet overlap compute
// on the copy stream.
#pragma once

#include "autograd/node.h"
#include "tensor/device.h"

namespace fitgrad::train {

// The hooks that offload the activations of `device` (cuda:N or meta).
autograd::SavedTensorHooks activation_offload_hooks(Device device);

}  // namespace fitgrad::train
