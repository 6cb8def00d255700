// Hugging Face weights into LoRA, NF4 and int8 layers (see peft_load.h).
#include "nn/peft_load.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "nn/int8_linear.h"
#include "nn/lora.h"
#include "nn/nf4_linear.h"
#include "tensor/error.h"

namespace fitgrad::nn {
namespace {

// The Hugging Face path of a layer at `path`: PEFT's base_layer step removed.
std::string hf_path(std::string path) {
  const std::string step = ".base_layer";
  if (path.ends_with(step)) path.erase(path.size() - step.size());
  return path;
}

}  // namespace

void load_into_adapted(Module& model, const TensorSource& source) {
  std::map<std::string, const TensorSource::Entry*> rest;
  for (const TensorSource::Entry& e : source.entries) rest[e.name] = &e;
  std::vector<std::string> problems;
  // 4-bit weights and the file entry each is quantized from, after every check passed.
  std::vector<std::pair<FourBitWeight*, std::string>> quantize;
  std::vector<std::pair<Int8Linear*, std::string>> quantize_int8;  // the same for int8 layers
  TensorSource renamed;                                            // model name -> the file's entry
  std::map<std::string, std::string> file_name;
  auto rename = [&](const std::string& to, const TensorSource::Entry& e) {
    TensorSource::Entry r = e;
    r.name = to;
    renamed.entries.push_back(r);
    file_name[to] = e.name;
  };
  for (const auto& [path, m] : model.named_modules()) {
    if (const auto* q = dynamic_cast<const FourBitWeight*>(m)) {
      const std::string key = hf_path(path) + ".weight";
      const auto it = rest.find(key);
      if (it == rest.end()) {
        problems.push_back(fmt::format("'{}' is missing (the 4-bit layer {})", key, path));
        continue;
      }
      const TensorSource::Entry& e = *it->second;
      if (!e.defined || e.shape != q->dense_shape() || !is_floating(e.dtype))
        problems.push_back(
            fmt::format("'{}' for the 4-bit layer {}: expected a floating {}, got {}", key, path,
                        shape_str(q->dense_shape()),
                        e.defined ? fmt::format("{} {}", dtype_name(e.dtype), shape_str(e.shape))
                                  : std::string("an undefined tensor")));
      // named_modules() lists the tree read-only; the model itself is ours to change.
      quantize.emplace_back(const_cast<FourBitWeight*>(q), key);
      rest.erase(it);
      const auto* nf4 = dynamic_cast<const Nf4Linear*>(m);
      if (nf4 && nf4->bias().defined()) {
        const auto b = rest.find(hf_path(path) + ".bias");
        if (b != rest.end()) {
          rename(path + ".bias", *b->second);
          rest.erase(b);
        }
      }
    } else if (const auto* q8 = dynamic_cast<const Int8Linear*>(m)) {
      // A dense weight into an int8 layer (Note [Int8 weights as parameters]): quantized to
      // nearest as it loads, its codes, scales and zeros kept out of the dense load.
      const std::string key = path + ".weight";
      const auto it = rest.find(key);
      if (it == rest.end()) {
        problems.push_back(fmt::format("'{}' is missing (the int8 layer {})", key, path));
        continue;
      }
      const TensorSource::Entry& e = *it->second;
      if (!e.defined || e.shape != q8->dense_shape() || !is_floating(e.dtype))
        problems.push_back(
            fmt::format("'{}' for the int8 layer {}: expected a floating {}, got {}", key, path,
                        shape_str(q8->dense_shape()),
                        e.defined ? fmt::format("{} {}", dtype_name(e.dtype), shape_str(e.shape))
                                  : std::string("an undefined tensor")));
      quantize_int8.emplace_back(const_cast<Int8Linear*>(q8), key);
      rest.erase(it);
      for (const char* p : {".weight", ".weight_scales", ".weight_zeros"})
        renamed.entries.push_back({path + p, {}, DType::u8, true, true});
    } else if (path.ends_with(".base_layer")) {  // a dense base under a LoRA layer
      for (const char* p : {".weight", ".bias"}) {
        const auto it = rest.find(hf_path(path) + p);
        if (it == rest.end()) continue;
        rename(path + p, *it->second);
        rest.erase(it);
      }
    }
  }
  for (const auto& [name, e] : rest) rename(name, *e);
  // The adapters' factors are not in a base model's file: they keep their values.
  for (const auto& [name, p] : model.named_parameters())
    if (name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos)
      renamed.entries.push_back({name, p.shape(), p.dtype(), true, true});
  if (!problems.empty()) throw Error(fmt::format("[load] {}", fmt::join(problems, "; ")));
  renamed.read = [&](const std::string& name) { return source.read(file_name.at(name)); };
  if (source.release)
    renamed.release = [&](const std::string& name) { source.release(file_name.at(name)); };
  model.load(renamed);
  const auto quantize_each = [&](auto& layers) {
    for (auto& [layer, key] : layers) {
      layer->quantize_from(source.read(key));
      if (source.release) source.release(key);
    }
  };
  quantize_each(quantize);
  quantize_each(quantize_int8);
}

void load_into_adapted(Module& model, const std::map<std::string, Tensor>& state) {
  load_into_adapted(model, TensorSource::of(state));
}

}  // namespace fitgrad::nn
