// Optimizers by Hugging Face name (see factory.h).
#include "optim/factory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <utility>

#include "optim/adafactor.h"
#include "optim/adam8bit.h"
#include "optim/apollo.h"
#include "optim/sgd.h"
#include "optim/target_modules.h"
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

constexpr const char* kApollo[] = {"apollo", "apollo_mini"};
constexpr const char* kGaLore[] = {"galore_adamw", "galore_adamw_8bit"};

bool is_apollo(const std::string& name) { return name == kApollo[0] || name == kApollo[1]; }
bool is_galore(const std::string& name) { return name == kGaLore[0] || name == kGaLore[1]; }

// Hugging Face's --optim_args as (key, value) pairs, in order, spaces dropped as transformers
// drops them; throws on an item that is not key=value and on a repeated key.
std::vector<std::pair<std::string, std::string>> parse_optim_args(std::string text) {
  std::erase(text, ' ');
  std::vector<std::pair<std::string, std::string>> out;
  if (text.empty()) return out;
  std::set<std::string> seen;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    start = end + 1;
    const size_t eq = item.find('=');
    FG_CHECK(eq != std::string::npos, "[optim] --optim_args: '{}' is not key=value", item);
    std::string key = item.substr(0, eq);
    FG_CHECK(seen.insert(key).second, "[optim] --optim_args: {} is given twice", key);
    out.emplace_back(std::move(key), item.substr(eq + 1));
  }
  return out;
}

// A number of `what` kind from the whole of `text`, or throws naming the key.
template <class T>
T parse_number(const std::string& key, const std::string& text, const char* what) {
  T v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  FG_CHECK(ec == std::errc() && end == text.data() + text.size(),
           "[optim] --optim_args: {} must be {}, got '{}'", key, what, text);
  return v;
}

// Throws unless `value` of `key` is `only`, the one value fitgrad has.
void require_only(const std::string& key, const std::string& value, const char* only) {
  FG_CHECK(value == only, "[optim] --optim_args: {} must be {} (fitgrad has no other), got '{}'",
           key, only, value);
}

[[noreturn]] void unknown_key(const std::string& key, const std::string& name, const char* known) {
  throw Error(
      fmt::format("[optim] --optim_args: unknown key '{}' for {} (known: {})", key, name, known));
}

}  // namespace

// Hugging Face's --optim_args keys are transformers' names for apollo_torch's group options.
ApolloOptions apollo_options(const std::string& name, const OptimizerExtras& extras) {
  FG_CHECK(is_apollo(name), "[optim] '{}' is not apollo or apollo_mini", name);
  ApolloOptions a = name == "apollo_mini" ? apollo_mini_options() : ApolloOptions{};
  a.seed = extras.seed;
  if (!extras.target_modules.empty())
    a.target_modules = parse_target_modules(extras.target_modules);
  for (const auto& [key, value] : parse_optim_args(extras.optim_args)) {
    if (key == "rank") {
      a.rank = parse_number<int64_t>(key, value, "an integer");
    } else if (key == "scale") {
      a.scale = parse_number<double>(key, value, "a number");
    } else if (key == "update_proj_gap") {
      a.update_proj_gap = parse_number<int64_t>(key, value, "an integer");
    } else if (key == "scale_type") {
      FG_CHECK(value == "channel" || value == "tensor",
               "[optim] --optim_args: scale_type must be channel or tensor, got '{}'", value);
      a.scaling = value == "channel" ? ApolloScaling::channel : ApolloScaling::tensor;
    } else if (key == "proj" || key == "proj_type") {
      require_only(key, value, key == "proj" ? "random" : "std");
    } else {
      unknown_key(key, name, "rank, scale, scale_type, update_proj_gap, proj, proj_type");
    }
  }
  check_apollo_options(a, name == "apollo_mini" ? kApollo[1] : kApollo[0]);
  return a;
}

// The keys and defaults of transformers' Trainer for galore_torch (its GaLore param group).
GaLoreOptions galore_options(const std::string& name, const OptimizerExtras& extras) {
  FG_CHECK(is_galore(name), "[optim] '{}' is not galore_adamw or galore_adamw_8bit", name);
  FG_CHECK(!extras.target_modules.empty(),
           "[optim] {} needs --optim_target_modules, the modules whose weights it projects "
           "(for example attn,mlp), as transformers' Trainer does",
           name);
  GaLoreOptions g;
  g.target_modules = parse_target_modules(extras.target_modules);
  for (const auto& [key, value] : parse_optim_args(extras.optim_args)) {
    if (key == "rank") {
      g.rank = parse_number<int64_t>(key, value, "an integer");
    } else if (key == "update_proj_gap") {
      g.update_proj_gap = parse_number<int64_t>(key, value, "an integer");
    } else if (key == "scale") {
      g.scale = parse_number<double>(key, value, "a number");
    } else if (key == "proj_type") {
      require_only(key, value, "std");
    } else {
      unknown_key(key, name, "rank, update_proj_gap, scale, proj_type");
    }
  }
  check_galore_options(g, name);
  return g;
}

// transformers' Trainer makes torch.optim.SGD with the learning rate alone; fitgrad also reads
// torch.optim.SGD's own keyword names from --optim_args, so momentum is reachable.
SgdOptions sgd_options(double lr, const OptimizerExtras& extras) {
  SgdOptions s;
  s.lr = lr;
  for (const auto& [key, value] : parse_optim_args(extras.optim_args)) {
    if (key == "momentum") {
      s.momentum = parse_number<double>(key, value, "a number");
      FG_CHECK(s.momentum >= 0 && s.momentum < 1,
               "[optim] --optim_args: momentum must be in [0, 1), got '{}'", value);
    } else if (key == "dampening") {
      s.dampening = parse_number<double>(key, value, "a number");
      FG_CHECK(s.dampening >= 0 && s.dampening <= 1,
               "[optim] --optim_args: dampening must be in [0, 1], got '{}'", value);
    } else if (key == "nesterov") {
      FG_CHECK(value == "true" || value == "false" || value == "True" || value == "False",
               "[optim] --optim_args: nesterov must be true or false, got '{}'", value);
      s.nesterov = value == "true" || value == "True";
    } else {
      unknown_key(key, "sgd", "momentum, dampening, nesterov");
    }
  }
  FG_CHECK(
      !s.nesterov || (s.momentum > 0 && s.dampening == 0),
      "[optim] --optim_args: nesterov needs momentum > 0 and dampening 0 (as torch.optim.SGD)");
  FG_CHECK(extras.target_modules.empty(),
           "[optim] --optim_target_modules is read only by apollo, apollo_mini, galore_adamw and "
           "galore_adamw_8bit, not by sgd");
  return s;
}

void check_optimizer_extras(const std::string& hf_name, const OptimizerExtras& extras) {
  if (hf_name == "sgd") {
    sgd_options(0.0, extras);
    return;
  }
  if (is_apollo(hf_name)) {
    apollo_options(hf_name, extras);
    return;
  }
  if (is_galore(hf_name)) {
    galore_options(hf_name, extras);
    return;
  }
  FG_CHECK(extras.optim_args.empty(),
           "[optim] --optim_args is read only by apollo, apollo_mini, galore_adamw, "
           "galore_adamw_8bit and sgd, not by {}",
           hf_name);
  FG_CHECK(extras.target_modules.empty(),
           "[optim] --optim_target_modules is read only by apollo, apollo_mini, galore_adamw and "
           "galore_adamw_8bit, not by {}",
           hf_name);
}

std::vector<std::string> optimizer_names() {
  std::vector<std::string> names(std::begin(kAdamW), std::end(kAdamW));
  names.emplace_back("sgd");
  names.insert(names.end(), std::begin(kAdam8bit), std::end(kAdam8bit));
  names.emplace_back("adafactor");
  names.emplace_back("adafactor_hf");
  names.insert(names.end(), std::begin(kApollo), std::end(kApollo));
  names.insert(names.end(), std::begin(kGaLore), std::end(kGaLore));
  return names;
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& hf_name,
                                          std::vector<ParamGroup> groups, const AdamWOptions& o,
                                          bool lr_given, const OptimizerExtras& extras) {
  check_optimizer_extras(hf_name, extras);
  if (is_apollo(hf_name)) {
    ApolloOptions a = apollo_options(hf_name, extras);
    a.lr = o.lr;
    a.beta1 = o.beta1;
    a.beta2 = o.beta2;
    a.eps = o.eps;
    return std::make_unique<Apollo>(std::move(groups), a,
                                    hf_name == "apollo" ? kApollo[0] : kApollo[1]);
  }
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
  if (is_galore(hf_name))
    return std::make_unique<GaLore>(std::move(groups), o, galore_options(hf_name, extras),
                                    hf_name == kGaLore[1]);
  if (hf_name == "sgd") return std::make_unique<SGD>(std::move(groups), sgd_options(o.lr, extras));
  for (const char* name : kNotYet)
    FG_CHECK(hf_name != name, "[optim] '{}' is not implemented yet (available: {})", hf_name,
             fmt::join(optimizer_names(), ", "));
  throw Error(fmt::format("[optim] unknown optimizer '{}' (known: {})", hf_name,
                          fmt::join(optimizer_names(), ", ")));
}

}  // namespace fitgrad::optim
