// Optimizers by Hugging Face name (see factory.h).
#include "optim/factory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "optim/adafactor.h"
#include "optim/adam8bit.h"
#include "optim/sgd.h"
#include "tensor/error.h"

namespace fitgrad::optim {
namespace {

constexpr const char* kAdamW[] = {"adamw_torch", "adamw_torch_fused", "adamw_hf"};
constexpr const char* kAdam8bit[] = {"adamw_8bit", "adamw_bnb_8bit", "adam8bit"};

// transformers' OptimizerNames that fitgrad does not implement.
constexpr const char* kNotYet[] = {
    "adamw_anyprecision",
    "adamw_apex_fused",
    "adamw_torch_xla",
    "adamw_torch_4bit",
    "adamw_torch_8bit",
    "adagrad",
    "ademamix",
    "ademamix_8bit",
    "galore_adafactor",
    "lion_32bit",
    "lion_8bit",
    "lomo",
    "adalomo",
    "paged_adamw_32bit",
    "paged_adamw_8bit",
    "paged_lion_32bit",
    "paged_lion_8bit",
    "rmsprop",
    "rmsprop_bnb",
    "rmsprop_bnb_8bit",
    "rmsprop_bnb_32bit",
    "schedule_free_adamw",
    "schedule_free_sgd",
};

}  // namespace

std::vector<std::string> optimizer_names() {
  std::vector<std::string> names(std::begin(kAdamW), std::end(kAdamW));
  names.emplace_back("sgd");
  names.insert(names.end(), std::begin(kAdam8bit), std::end(kAdam8bit));
  names.emplace_back("adafactor");
  names.emplace_back("adafactor_hf");
  names.emplace_back("galore_adamw");
  names.emplace_back("galore_adamw_8bit");
  return names;
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& hf_name,
                                          std::vector<ParamGroup> groups, const AdamWOptions& o,
                                          bool lr_given, const GaLoreOptions& galore) {
  for (const char* name : kAdamW)
    if (hf_name == name) return std::make_unique<AdamW>(std::move(groups), o);
  for (const char* name : kAdam8bit)
    if (hf_name == name) {
      Adam8bitOptions a;
      a.lr = o.lr;
      a.beta1 = o.beta1;
      a.beta2 = o.beta2;
      a.eps = o.eps;
      return std::make_unique<Adam8bit>(std::move(groups), a, hf_name);
    }
  if (hf_name == "adafactor") {
    AdafactorOptions a;
    a.lr = o.lr;
    return std::make_unique<Adafactor>(std::move(groups), a);
  }
  if (hf_name == "adafactor_hf") {
    AdafactorHFOptions a;
    if (lr_given) {
      a.lr = o.lr;
      a.relative_step = false;
      a.scale_parameter = false;
    }
    return std::make_unique<AdafactorHF>(std::move(groups), a);
  }
  if (hf_name == "galore_adamw" || hf_name == "galore_adamw_8bit")
    return std::make_unique<GaLore>(std::move(groups), o, galore, hf_name == "galore_adamw_8bit");
  if (hf_name == "sgd") {
    SgdOptions s;
    s.lr = o.lr;
    return std::make_unique<SGD>(std::move(groups), s);
  }
  for (const char* name : kNotYet)
    FG_CHECK(hf_name != name, "[optim] '{}' is not implemented yet (available: {})", hf_name,
             fmt::join(optimizer_names(), ", "));
  throw Error(fmt::format("[optim] unknown optimizer '{}' (known: {})", hf_name,
                          fmt::join(optimizer_names(), ", ")));
}

}  // namespace fitgrad::optim
