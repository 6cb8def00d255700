// CPU kernel of bitsandbytes' Adam with 8-bit blockwise state (Adam8bit, AdamW8bit), and of
// its 32-bit kernel that tensors below bitsandbytes' min_8bit_size use. See Note [Adam8bit
// kernel] in adam8bit.cpp.
#pragma once

#include "tensor/backend/kernel_args.h"

namespace fitgrad::cpu {

using backend::kAdam8bitBlock;

void adam8bit_update(const backend::Adam8bitArgs& a);

}  // namespace fitgrad::cpu
