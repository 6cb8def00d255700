// TensorSource (see tensor_source.h).
#include "nn/tensor_source.h"

#include <memory>

namespace fitgrad::nn {

TensorSource TensorSource::of(const std::map<std::string, Tensor>& state) {
  TensorSource s;
  for (const auto& [name, t] : state)
    s.entries.push_back(t.defined() ? Entry{name, t.shape(), t.dtype(), true}
                                    : Entry{name, {}, DType::f32, false});
  auto held = std::make_shared<std::map<std::string, Tensor>>(state);
  s.read = [held](const std::string& name) { return held->at(name); };
  return s;
}

std::map<std::string, Tensor> TensorSource::read_all() const {
  std::map<std::string, Tensor> out;
  for (const Entry& e : entries) out.emplace(e.name, e.defined ? read(e.name) : Tensor());
  return out;
}

}  // namespace fitgrad::nn
