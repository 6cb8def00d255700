// The Module tree: registration, traversal, initialisation and loading (module.h).
#include "nn/module.h"

#include <algorithm>
#include <set>

#include "autograd/variable.h"
#include "tensor/error.h"
#include "tensor/glob.h"
#include "tensor/interrupt.h"
#include "tensor/ops/random.h"

namespace fitgrad::nn {

BuildContext::BuildContext(const BuildOptions& o) : options(o), own_(o.seed) {}

namespace {

std::string shape_str(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

}  // namespace

// Note [Parameter initialisation] in module.h.
void init_tensor(Tensor& t, const Init& init, Generator& gen) {
  switch (init.kind) {
    case Init::Kind::zeros: t.fill_(0.0); return;
    case Init::Kind::ones: t.fill_(1.0); return;
    case Init::Kind::normal: break;
    case Init::Kind::uniform:
      FG_CHECK(t.is_contiguous(), "[init] a parameter must be contiguous");
      ops::uniform_(t, gen.reserve(uint64_t(t.numel())), -init.std, init.std);
      return;
  }
  FG_CHECK(t.is_contiguous(), "[init] a parameter must be contiguous");
  const int64_t n = t.numel();
  ops::normal_(t, gen.reserve(uint64_t(n + (n & 1))), init.std);
}

Module::Module(std::string path, std::string name)
    : path_(std::move(path)), name_(std::move(name)) {}

namespace {

int64_t set_trainable(const Module& m, const std::string& pattern, bool trainable, const char* op) {
  FG_CHECK(!pattern.empty(), "[{}] the pattern is empty", op);
  int64_t matched = 0;
  for (const auto& [name, t] : m.named_parameters()) {
    if (!glob_match(pattern, name)) continue;
    autograd::set_requires_grad(t, trainable);
    if (!trainable) autograd::clear_grad(t);
    ++matched;
  }
  FG_CHECK(matched > 0, "[{}] no parameter matches '{}' (names look like '{}')", op, pattern,
           m.named_parameters().empty() ? std::string("<none>") : m.named_parameters()[0].first);
  return matched;
}

}  // namespace

int64_t Module::freeze(const std::string& pattern) const {
  return set_trainable(*this, pattern, false, "freeze");
}

int64_t Module::unfreeze(const std::string& pattern) const {
  return set_trainable(*this, pattern, true, "unfreeze");
}

std::vector<std::pair<std::string, Tensor>> Module::trainable_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, t] : named_parameters())
    if (autograd::requires_grad(t)) out.emplace_back(name, t);
  return out;
}

Tensor Module::register_parameter(const std::string& name, const Shape& shape, const Init& init,
                                  BuildContext& ctx, const ParamOptions& options) {
  for (const auto& [n, t] : params_)
    FG_ASSERT(n != name, "parameter {} registered twice in {}", name, path_);
  const std::string full = child_path(name);
  Tensor t;
  {
    MemoryContextScope label(MemoryContext{Category::parameter, intern_label(full)});
    FG_CHECK(is_floating(options.dtype.value_or(ctx.options.dtype)),
             "[{}] parameter {} must be floating, got {}", path_, name,
             dtype_name(options.dtype.value_or(ctx.options.dtype)));
    t = Tensor::empty(shape, options.dtype.value_or(ctx.options.dtype), ctx.options.device);
    if (ctx.options.initialize) init_tensor(t, init, ctx.generator());
  }
  autograd::set_requires_grad(t, options.requires_grad);
  autograd::set_name(t, full);
  params_.emplace_back(name, t);
  return t;
}

Tensor Module::adopt_parameter(const std::string& name, const Tensor& t, bool requires_grad) {
  for (const auto& [n, p] : params_)
    FG_ASSERT(n != name, "parameter {} registered twice in {}", name, path_);
  const std::string full = child_path(name);
  if (requires_grad && !is_floating(t.dtype()))
    autograd::set_requires_float_grad(t);
  else
    autograd::set_requires_grad(t, requires_grad);
  autograd::set_name(t, full);
  params_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, const Shape& shape, DType dtype,
                               const Init& init, BuildContext& ctx) {
  for (const auto& [n, t] : buffers_)
    FG_ASSERT(n != name, "buffer {} registered twice in {}", name, path_);
  for (const auto& [n, t] : params_)
    FG_ASSERT(n != name, "buffer {} has the name of a parameter of {}", name, path_);
  const std::string full = child_path(name);
  MemoryContextScope label(MemoryContext{Category::buffer, intern_label(full)});
  Tensor t = Tensor::empty(shape, dtype, ctx.options.device);
  if (ctx.options.initialize) init_tensor(t, init, ctx.generator());
  buffers_.emplace_back(name, t);
  return t;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, t] : buffers_) out.emplace_back(child_path(name), t);
  for (const auto& [name, child] : children_) {
    auto sub = child->named_buffers();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

bool Module::ignorable_key(const std::string&) const { return false; }

void Module::collect(std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [name, t] : params_) out.emplace_back(child_path(name), t);
  for (const auto& [name, child] : children_) child->collect(out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect(out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, const Module*>> Module::named_modules() const {
  std::vector<std::pair<std::string, const Module*>> out{{path_, this}};
  for (const auto& [name, child] : children_) {
    auto sub = child->named_modules();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

Tensor Module::parameter(const std::string& full_name) const {
  for (auto& [name, t] : named_parameters())
    if (name == full_name) return t;
  throw Error(
      fmt::format("[module {}] no parameter '{}'", path_.empty() ? "<root>" : path_, full_name));
}

std::map<std::string, Tensor> Module::state_dict() const {
  const auto params = named_parameters();
  return {params.begin(), params.end()};
}

void Module::train(bool on) {
  training_ = on;
  for (const auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() const {
  for (const auto& [name, t] : named_parameters()) autograd::clear_grad(t);
}

// Note [Loading by name]
// load() checks everything before it copies anything, and one error lists every fault:
//   missing     a parameter with no entry (strict only),
//   unexpected  an entry that is no parameter and not ignorable_key() (strict only),
//   mismatched  an entry whose shape differs from the parameter's, or whose dtype is not
//               floating (packed/quantized data needs its own loader) -- also when not strict;
//               an integer parameter (an int8 weight's codes) takes only its own dtype.
// Floating dtypes convert exactly as Tensor::copy_ does (a bf16 checkpoint loads into f32
// parameters), and devices too; on meta the copy is a no-op. The parameters keep their
// identity (copy_ into the existing leaves), so optimizers and hooks stay attached.
void Module::load(const std::map<std::string, Tensor>& state, bool strict) {
  load(TensorSource::of(state), strict);
}

void Module::load(const TensorSource& source, bool strict) {
  const auto params = named_parameters();
  std::map<std::string, const TensorSource::Entry*> entries;
  for (const TensorSource::Entry& e : source.entries) entries[e.name] = &e;
  std::vector<std::string> missing, unexpected, mismatched;
  std::set<std::string> names;
  for (const auto& [name, p] : params) {
    names.insert(name);
    auto it = entries.find(name);
    if (it == entries.end()) {
      if (strict) missing.push_back(name);
      continue;
    }
    const TensorSource::Entry& src = *it->second;
    if (src.keep) continue;
    if (!src.defined) {
      mismatched.push_back(name + ": the entry is an undefined tensor");
    } else if (src.shape != p.shape()) {
      mismatched.push_back(fmt::format("{}: expected shape {}, got {}", name, shape_str(p.shape()),
                                       shape_str(src.shape)));
    } else if (!is_floating(p.dtype()) && src.dtype != p.dtype()) {
      mismatched.push_back(fmt::format("{}: expected {} (quantized), got {}", name,
                                       dtype_name(p.dtype()), dtype_name(src.dtype)));
    } else if (is_floating(p.dtype()) && !is_floating(src.dtype)) {
      mismatched.push_back(fmt::format("{}: expected a floating dtype ({}), got {}", name,
                                       dtype_name(p.dtype()), dtype_name(src.dtype)));
    }
  }
  if (strict)
    for (const auto& [name, e] : entries)
      if (!names.count(name) && !ignorable_key(name)) unexpected.push_back(name);
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty()) {
    auto list = [](const char* what, const std::vector<std::string>& v) {
      if (v.empty()) return std::string();
      std::string s = fmt::format("\n  {} {}:", v.size(), what);
      for (const auto& x : v) s += "\n    " + x;
      return s;
    };
    throw Error(fmt::format(
        "[load {}] the state does not match the model ({} parameters, {} "
        "entries):{}{}{}",
        path_.empty() ? "model" : path_, params.size(), entries.size(), list("missing", missing),
        list("unexpected", unexpected), list("mismatched", mismatched)));
  }
  for (const auto& [name, p] : params) {  // Note [Streaming loads]: one entry at a time
    auto it = entries.find(name);
    if (it == entries.end() || it->second->keep) continue;
    interruption_point();  // Note [Interruption points]: each tensor loaded
    Tensor dst = p;
    dst.copy_(source.read(name));
    if (source.release) source.release(name);
  }
}

}  // namespace fitgrad::nn
