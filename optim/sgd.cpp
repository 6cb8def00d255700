// SGD (see sgd.h).
#include "optim/sgd.h"

#include "tensor/backend/kernel_table.h"
#include "tensor/error.h"
#include "tensor/ops/optim_update.h"

namespace fitgrad::optim {
namespace {

// With momentum, one f32 buffer of the parameter's shape that starts as the first gradient.
StateSpecFn sgd_specs(const SgdOptions& o) {
  return [momentum = o.momentum](const std::string&, const Tensor& p) {
    if (momentum == 0) return std::vector<StateSpec>{};
    return std::vector<StateSpec>{
        {.name = "momentum_buffer", .shape = p.shape(), .init = std::nullopt}};
  };
}

}  // namespace

SGD::SGD(std::vector<ParamGroup> groups, const SgdOptions& options)
    : Optimizer(std::move(groups), options.lr, "sgd", sgd_specs(options)), options_(options) {
  FG_CHECK(options.momentum >= 0, "[sgd] momentum must be >= 0, got {}", options.momentum);
  FG_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0),
           "[sgd] nesterov needs momentum > 0 and dampening 0");
}

void SGD::update(size_t i, const ParamGroup& group, const std::string&, const Tensor& p,
                 const Tensor& g) {
  backend::require_kernel(backend::OpId::sgd_update, p.device());  // as in AdamW::update
  ParamStates::State& s = states_.begin_update(i);  // the buffer's init: none, see sgd_specs
  const bool first = s.step == 1;
  const backend::SgdScalars k{float(lr_),
                              float(group.weight_decay),
                              float(options_.momentum),
                              float(1 - options_.dampening),
                              options_.nesterov,
                              first};
  ops::sgd_update_(p, g.contiguous(), s.buffers.empty() ? Tensor() : s.buffers[0], k, rounding(p));
}

}  // namespace fitgrad::optim
