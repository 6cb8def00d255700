// Gradient clipping by global L2 norm, torch.nn.utils.clip_grad_norm_'s semantics.
#pragma once

#include <functional>
#include <vector>

#include "tensor/tensor.h"

namespace fitgrad::optim {

// Note [Clipping on the device]
// The squares of every gradient (autograd::grad of each parameter; undefined ones are
// skipped) are summed in double, in parameter order, into one double on their device, and
// the scale kernel computes the coefficient max_norm / (norm + 1e-6) from that sum where it
// lies: below 1 every gradient is multiplied by it (in f32); at 1 or more, or with a
// non-finite norm, the gradients are left as they are (torch would multiply them by 0 or
// NaN; the caller skips such a step, as the loss scaler does). So a training step clips
// without a host read (Note [Host reads] in tensor/host_reads.h), and the norm is read only
// when it is logged. The order of the sum is fixed, so the result is the same on any thread
// count. On meta nothing is computed.
//
// sum_sq: one double of ops::zero_doubles on the gradients' device, zero on entry; on return
// it holds the squared norm before clipping. Every gradient must be on its device.
// `reduce`, when given, is called on sum_sq between the sum and the scaling: ZeRO stage 2
// (dist/zero.h), whose ranks each hold a share of the gradients, adds the ranks' sums there.
void clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, const Tensor& sum_sq,
                     const std::function<void(const Tensor&)>& reduce = {});

// The same into a fresh double, then the norm before clipping read on the host (one host
// read); 0 on meta and when no parameter has a gradient.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace fitgrad::optim
