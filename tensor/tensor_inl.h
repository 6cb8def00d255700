// Template definitions of Tensor (included at the end of tensor.h): from_vector,
// to_vector and data<T>. Elements convert with the rules of tensor/convert.h.
#pragma once

#include "tensor/convert.h"
#include "tensor/error.h"

namespace fitgrad {

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape, DType dtype,
                           Device device) {
  FG_CHECK(int64_t(values.size()) == fitgrad::numel(shape),
           "[from_vector] {} values for shape {} of {} elements", values.size(), shape_str(shape),
           fitgrad::numel(shape));
  Tensor host = empty(shape, dtype);
  dispatch_dtype(dtype, [&](auto tag) {
    using S = decltype(tag);
    S* out = static_cast<S*>(host.data_ptr());
    for (size_t i = 0; i < values.size(); ++i) out[i] = convert<S>(values[i]);
  });
  return host.to(device);
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  FG_CHECK(device().has_bytes(), "[to_vector] meta tensors have no data");
  const Tensor host = read_host("to_vector");
  std::vector<T> out(size_t(host.numel()));
  if (out.empty()) return out;
  dispatch_dtype(host.dtype(), [&](auto tag) {
    using S = decltype(tag);
    const S* in = static_cast<const S*>(host.data_ptr());
    for (size_t i = 0; i < out.size(); ++i) out[i] = convert<T>(in[i]);
  });
  return out;
}

template <class T>
T* Tensor::data() const {
  FG_CHECK(dtype_of<T>() == dtype(), "[data] asked for {} elements of a {} tensor",
           dtype_name(dtype_of<T>()), dtype_name(dtype()));
  return static_cast<T*>(data_ptr());
}

}  // namespace fitgrad
