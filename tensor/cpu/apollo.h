// CPU kernel of APOLLO's update of a projected matrix (Zhu et al. 2024; backend::ApolloArgs
// gives the arithmetic, optim/apollo.h computes the scalars and the projection). Three
// passes: the low-rank Adam moments with each channel's sums of squares, the norm of the
// scaled gradient by rows, and the update. Every sum is in double in a fixed order (a
// channel over its rank index in order, a row in eight interleaved partials, the rows and
// the channels in index order), so the result does not depend on the thread count.
#pragma once

#include "tensor/backend/kernel_args.h"

namespace fitgrad::cpu {

void apollo_update(const backend::ApolloArgs& a);

}  // namespace fitgrad::cpu
