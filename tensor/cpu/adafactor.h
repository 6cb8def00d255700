// CPU kernel of Adafactor's update (Shazeer & Stern 2018), in the two published variants
// (backend::AdafactorScalars; optim/adafactor.h computes the scalars). A parameter is viewed
// as (batch, rows, cols): its last two dims when factored, (1, 1, n) otherwise. With
// rms(x) = ||x||_2 / sqrt(numel) and sums in double:
//   torch: alpha = max(eps2, rms(p)) * rho;  p *= decay
//          factored: row = lerp(row, mean_c g^2, w), col = lerp(col, mean_r g^2, w),
//                    v = row_r col_c / max(mean_r row, eps1); else full = lerp(full, g^2, w)
//          u = g / sqrt(max(v, eps1^2));  p -= alpha / max(1, rms(u) / d) * u
//   hf:    lr_t = (scale_parameter ? max(eps_scale, rms(p)) : 1) * rel_step; q = g^2 + eps0
//          factored: row = beta2t row + (1 - beta2t) mean_c q, col likewise with mean_r q,
//                    u = g / sqrt(row_r / mean_r row) / sqrt(col_c);
//          else full = beta2t full + (1 - beta2t) q, u = g / sqrt(full)
//          u = u / max(rms(u) / clip_threshold, 1) * lr_t; with beta1: m = beta1 m +
//          (1 - beta1) u, u = m;  p = p + p * (-weight_decay lr_t);  p = p - u
// w is the scalar one_minus_beta2; lerp is torch's (exact at w = 1). The update u is never
// stored: it is recomputed in the pass that applies it, so the step needs only the
// workspace of partial sums (backend::adafactor_workspace_doubles).
#pragma once

#include "tensor/backend/kernel_args.h"

namespace fitgrad::cpu {

void adafactor_update(const backend::AdafactorArgs& a);

}  // namespace fitgrad::cpu
