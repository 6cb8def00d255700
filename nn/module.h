// The Module tree (DESIGN.md, nn/): named children and named parameters whose full dotted
// names are Hugging Face's (`transformer.h.0.attn.c_attn.weight`,
// `model.layers.0.self_attn.q_proj.weight`), so checkpoints match `transformers`.
//
// Note [Module names are memory labels]
// A module knows its full path when it is constructed: a parent constructs each child
// through register_module(name, ...), which passes the child the path "<parent>.<name>".
// register_parameter allocates under Category::parameter with the full parameter name as
// label, marks the tensor as a leaf requiring grad and names it (so its gradient is
// labelled "<name>.grad"). At run time a module's forward opens a LabelScope of its local
// name (ForwardScope below); nested scopes therefore compose the full path, so the
// activations of `model.layers.3.mlp` carry that label, also when a checkpoint recomputes
// them (the recompute restores the label the segment started under).
//
// Note [Parameter initialisation]
// Parameters are created by one function, from an Init: zeros, ones, or normal(0, std)
// from a Generator. Normals come from Philox uniforms by Box-Muller: the tensor reserves
// numel rounded up to even draws; draws 2k and 2k+1 give (u1, u2) and elements 2k and 2k+1
// get r cos(2 pi u2) and r sin(2 pi u2), r = sqrt(-2 ln(1 - u1)). The result depends only
// on the generator state and the order of creation (registration order), so a model built
// twice from the same seed is bitwise the same, on any thread count. The fill is an op
// (ops::normal_) that writes the parameter in place, so no staging buffer exists; on the
// meta device nothing is computed but the draws are still reserved, so a dry run leaves
// the generator where the real build would.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/tensor_source.h"
#include "tensor/memory/scope.h"
#include "tensor/ops/quantize.h"
#include "tensor/random/generator.h"
#include "tensor/tensor.h"

namespace fitgrad::nn {

struct BuildContext;
class LinearLayer;     // nn/layers.h
struct LinearSpec;     // nn/layers.h
struct LinearOptions;  // nn/layers.h
// Makes the Linear layer a spec asks for (Note [Linear factory] in nn/layers.h).
using LinearFactory =
    std::function<std::unique_ptr<LinearLayer>(const LinearSpec& spec, BuildContext& ctx)>;

// Where and how parameters are created.
struct BuildOptions {
  Device device = Device::cpu();
  DType dtype = DType::f32;
  // The generator initialisation draws from; nullptr: a private Generator(seed).
  Generator* generator = nullptr;
  uint64_t seed = 0;
  // false: parameters are allocated but left uninitialised (about to be loaded).
  bool initialize = true;
  // Makes every Linear of the model; empty: a dense nn::Linear (Note [Linear factory]).
  LinearFactory linear_factory = {};
  // When set, a Llama's token embedding is a frozen 4-bit Nf4Embedding with these options
  // (Note [Quantizing the embedding] in nn/nf4_embedding.h).
  std::optional<ops::FourBitOptions> quantized_embedding = std::nullopt;
};

// How one parameter starts (Note [Parameter initialisation]).
struct Init {
  enum class Kind { zeros, ones, normal, uniform };
  Kind kind = Kind::zeros;
  double std = 0.0;  // normal: the standard deviation; uniform: the bound b of U(-b, b)
  static Init zeros() { return {Kind::zeros, 0.0}; }
  static Init ones() { return {Kind::ones, 0.0}; }
  static Init normal(double sd) { return {Kind::normal, sd}; }
  static Init uniform(double bound) { return {Kind::uniform, bound}; }
};

// What a module needs to create its parameters: the options and the generator to draw
// from. Shared (by reference) by every module of one build.
struct BuildContext {
  explicit BuildContext(const BuildOptions& options);
  BuildContext(const BuildContext&) = delete;
  BuildContext& operator=(const BuildContext&) = delete;

  BuildOptions options;
  Generator& generator() { return options.generator ? *options.generator : own_; }

 private:
  Generator own_;
};

// Fills `t` per `init`, drawing from `gen` (Note [Parameter initialisation]); on meta only
// the draws are reserved.
void init_tensor(Tensor& t, const Init& init, Generator& gen);

// How one parameter is created (Module::register_parameter): its dtype (the build's when
// unset) and whether it requires grad (false: created frozen, as a LoRA base is).
struct ParamOptions {
  std::optional<DType> dtype = std::nullopt;
  bool requires_grad = true;
};

class Module {
 public:
  // `path` is the full dotted name ("" for a root); `name` the local part a parent's
  // forward opens as a LabelScope (may itself be dotted, "h.3").
  Module(std::string path, std::string name);
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& path() const { return path_; }
  const std::string& name() const { return name_; }

  // Every parameter, as (full dotted name, tensor): a module's own parameters in
  // registration order, then each child's, children in registration order (PyTorch's order).
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  // This module and every descendant, as (full path, module), pre-order.
  std::vector<std::pair<std::string, const Module*>> named_modules() const;
  int64_t num_parameters() const;
  // The parameter with this full name; throws "[module] no parameter 'x'" when missing.
  Tensor parameter(const std::string& full_name) const;
  // (full name, tensor) of every parameter, sorted by name (aliases, not copies).
  std::map<std::string, Tensor> state_dict() const;

  // Copies every parameter from `state` by full name (Note [Loading by name] in module.cpp).
  // strict: every parameter must be present and every entry must be a parameter. Shapes
  // must match; floating dtypes convert. Nothing is copied when anything is wrong, and the
  // error names every missing, unexpected and mismatched name.
  void load(const std::map<std::string, Tensor>& state, bool strict = true);
  // The same from a source, checked whole first and then read one entry at a time (Note
  // [Streaming loads] in nn/tensor_source.h). An entry marked keep is present but not read:
  // the parameter keeps its value.
  void load(const TensorSource& source, bool strict = true);

  // Drops every parameter's gradient (zero_grad with set_to_none).
  void zero_grad() const;

  // Note [Freezing by name]
  // freeze(pattern) stops every parameter whose full name matches `pattern` from requiring
  // grad; unfreeze(pattern) makes it require grad again. A pattern is a glob over the full
  // dotted name: `*` matches any run of characters (dots included), `?` one character, so
  // "model.layers.*.self_attn.*" or "*.bias". A frozen parameter gets no gradient, and the
  // backward rules skip the work only its gradient needs (Note [Frozen inputs] in
  // autograd/node.h); optimizers allocate state lazily at a parameter's first gradient, so a
  // frozen one holds none. Both return how many parameters matched; a pattern that matches
  // none is an error naming it, so a typo cannot silently train everything.
  int64_t freeze(const std::string& pattern) const;
  int64_t unfreeze(const std::string& pattern) const;
  // The parameters that require grad, as named_parameters() lists them.
  std::vector<std::pair<std::string, Tensor>> trainable_parameters() const;
  // Note [Training mode]
  // train() puts this module and every descendant in training mode, eval() takes them out,
  // as torch.nn.Module.train/eval do; only dropout reads the mode (Note [Dropout as
  // configured] in config.h). A module starts in eval mode, as a Hugging Face model does
  // after from_pretrained; train::TrainStep switches its model to training mode for each
  // step, and `fitgrad train` back to eval mode for evaluation.
  void train(bool on = true);
  void eval() { train(false); }
  bool training() const { return training_; }
  // Every buffer (register_buffer), as (full dotted name, tensor), in the order of
  // named_parameters().
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;

 protected:
  // Allocates and initialises a parameter named "<path>.<name>" (see the Notes above),
  // directly in its dtype on the build's device: nothing is made in f32 and cast after.
  Tensor register_parameter(const std::string& name, const Shape& shape, const Init& init,
                            BuildContext& ctx, const ParamOptions& options = {});
  // Registers `t`, allocated by the caller in any dtype under its own category and label, as
  // the parameter "<path>.<name>" (an int8 weight's codes, scales and zeros, Note [Int8
  // weights as parameters] in nn/int8_linear.h). An integer `t` requiring grad gets a
  // floating gradient (autograd::set_requires_float_grad).
  Tensor adopt_parameter(const std::string& name, const Tensor& t, bool requires_grad);
  // Note [Buffers]
  // A buffer is module state that is not trained: a mask, a table of constants, later the
  // quantization state beside an NF4 weight. It is allocated like a parameter, on the build's
  // device, but in its own dtype and under Category::buffer with its full name as label, so
  // the ledger shows it apart from the parameters. It never requires grad, freeze() does not
  // see it, optimizers never get it, and it is not in state_dict(): a buffer is rebuilt
  // with the model (PyTorch's persistent=False).
  Tensor register_buffer(const std::string& name, const Shape& shape, DType dtype, const Init& init,
                         BuildContext& ctx);
  // Makes the Linear child `name` through the build's factory (a dense Linear by default)
  // and keeps it (Note [Linear factory] in nn/layers.h; defined in nn/layers.cpp).
  LinearLayer& register_linear(const std::string& name, int64_t in, int64_t out,
                               const LinearOptions& options, BuildContext& ctx);
  // Keeps `layer`, made for `spec` by some factory, as the child `name` after checking that
  // it has the spec's path and sizes (register_linear's check; defined in nn/layers.cpp).
  LinearLayer& adopt_linear(const std::string& name, std::unique_ptr<LinearLayer> layer,
                            const LinearSpec& spec);
  // Constructs a child M(path + "." + name, name, args...) and keeps it.
  template <class M, class... Args>
  M& register_module(const std::string& name, Args&&... args) {
    auto child = std::make_unique<M>(child_path(name), name, std::forward<Args>(args)...);
    M& ref = *child;
    children_.emplace_back(name, std::move(child));
    return ref;
  }
  std::string child_path(const std::string& name) const {
    return path_.empty() ? name : path_ + "." + name;
  }
  // State entries that load() skips silently even when strict: Hugging Face buffers and
  // tied copies (a tied lm_head.weight). Default: none.
  virtual bool ignorable_key(const std::string& key) const;

  // A forward's LabelScope of this module's local name (none for an empty name).
  class ForwardScope {
   public:
    explicit ForwardScope(const Module& m) {
      if (!m.name().empty()) scope_.emplace(m.name());
    }

   private:
    std::optional<LabelScope> scope_;
  };

 private:
  void collect(std::vector<std::pair<std::string, Tensor>>& out) const;
  std::string path_;
  std::string name_;
  bool training_ = false;
  std::vector<std::pair<std::string, Tensor>> params_;   // local name
  std::vector<std::pair<std::string, Tensor>> buffers_;  // local name (Note [Buffers])
  std::vector<std::pair<std::string, std::unique_ptr<Module>>> children_;
};

}  // namespace fitgrad::nn
