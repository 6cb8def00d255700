// TensorSource (see tensor_source.h).
#include "nn/tensor_source.h"

#include <memory>
#include <utility>

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

TensorSource TensorSource::meta_views() const {
  TensorSource s;
  s.entries = entries;
  auto shapes = std::make_shared<std::map<std::string, std::pair<Shape, DType>>>();
  for (const Entry& e : entries) (*shapes)[e.name] = {e.shape, e.dtype};
  s.read = [shapes](const std::string& name) {
    const auto& [shape, dtype] = shapes->at(name);
    return Tensor::from_storage(
        Storage::wrap(nullptr, size_t(numel(shape)) * element_size(dtype), {}, Device::meta()),
        shape, dtype);
  };
  return s;
}

std::map<std::string, Tensor> TensorSource::read_all() const {
  std::map<std::string, Tensor> out;
  for (const Entry& e : entries) out.emplace(e.name, e.defined ? read(e.name) : Tensor());
  return out;
}

}  // namespace fitgrad::nn
