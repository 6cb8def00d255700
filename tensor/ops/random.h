// Random fills as ops (DESIGN.md, Numerics: counter-based Philox draws, so every backend
// and a resumed run draw the same stream). The caller reserves the draws from a Generator
// and passes their start; the fill itself runs on the tensor's backend, in place, with no
// staging buffer.
#pragma once

#include "tensor/random/generator.h"
#include "tensor/tensor.h"

namespace fitgrad::ops {

// out (contiguous, floating) = std * Box-Muller normals of the draws from `state`, two per
// pair of elements: numel + numel % 2 draws (backend::NormalArgs).
void normal_(const Tensor& out, const RngState& state, double std);
// out (contiguous, floating) = uniforms in [lo, hi) of the draws from `state`, one per
// element (backend::UniformArgs, as Generator::uniform draws them).
void uniform_(const Tensor& out, const RngState& state, double lo, double hi);

}  // namespace fitgrad::ops
