// Gradient clipping by global L2 norm, torch.nn.utils.clip_grad_norm_'s semantics.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace fitgrad::optim {

// The L2 norm of all the parameters' gradients together (autograd::grad; undefined ones
// are skipped), accumulated in double in a fixed order, so it is the same on any thread
// count. When the coefficient max_norm / (norm + 1e-6) is below 1 every gradient is
// multiplied by it (in f32). Returns the norm before clipping. A non-finite norm is
// returned, not thrown, and then the gradients are left as they are (torch would multiply
// them by 0 or NaN; the caller skips such a step, as the loss scaler does). On meta nothing
// is computed and 0 is returned.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace fitgrad::optim
