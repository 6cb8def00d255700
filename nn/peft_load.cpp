// Hugging Face weights into LoRA and NF4 layers (see peft_load.h).
#include "nn/peft_load.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

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

void load_into_adapted(Module& model, const std::map<std::string, Tensor>& state) {
  std::map<std::string, Tensor> rest = state;
  std::vector<std::string> problems;
  // 4-bit weights: quantized from the file's dense weight, after every check below passed.
  std::vector<std::pair<FourBitWeight*, Tensor>> quantize;
  std::map<std::string, Tensor> renamed;
  for (const auto& [path, m] : model.named_modules()) {
    if (const auto* q = dynamic_cast<const FourBitWeight*>(m)) {
      const std::string key = hf_path(path) + ".weight";
      const auto it = rest.find(key);
      if (it == rest.end()) {
        problems.push_back(fmt::format("'{}' is missing (the 4-bit layer {})", key, path));
        continue;
      }
      // named_modules() lists the tree read-only; the model itself is ours to change.
      quantize.emplace_back(const_cast<FourBitWeight*>(q), it->second);
      rest.erase(it);
      const auto* nf4 = dynamic_cast<const Nf4Linear*>(m);
      if (nf4 && nf4->bias().defined()) {
        const auto b = rest.find(hf_path(path) + ".bias");
        if (b != rest.end()) {
          renamed[path + ".bias"] = b->second;
          rest.erase(b);
        }
      }
    } else if (path.ends_with(".base_layer")) {  // a dense base under a LoRA layer
      for (const char* p : {".weight", ".bias"}) {
        const auto it = rest.find(hf_path(path) + p);
        if (it == rest.end()) continue;
        renamed[path + p] = it->second;
        rest.erase(it);
      }
    }
  }
  for (auto& [name, t] : rest) renamed.emplace(name, t);
  // The adapters' factors are not in a base model's file: they keep their values.
  for (const auto& [name, p] : model.named_parameters())
    if (name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos)
      renamed.emplace(name, p);
  if (!problems.empty()) throw Error(fmt::format("[load] {}", fmt::join(problems, "; ")));
  model.load(renamed);
  for (auto& [layer, w] : quantize) layer->quantize_from(w);
}

}  // namespace fitgrad::nn
