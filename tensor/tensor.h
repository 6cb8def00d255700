// Tensor = Storage + shape + strides + offset + dtype (DESIGN.md, Core objects).
//
// A Tensor is a cheap handle to a shared TensorImpl: copying a Tensor aliases the same
// tensor (as in PyTorch), while view ops make a new TensorImpl over the same Storage.
// Autograd data hangs off the impl through one opaque pointer, so tensor/ does not
// depend on autograd/. Shapes and strides count elements; the offset is in elements too.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/shape.h"
#include "tensor/storage.h"

namespace fitgrad {

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Strides strides;
  int64_t offset = 0;  // elements from the start of the storage
  DType dtype = DType::f32;
  // Owned by autograd/ (see autograd's header); tensor/ never looks inside.
  std::shared_ptr<void> autograd;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false, every other call throws
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- creation ----
  // A contiguous tensor of `shape` over the whole of `storage` (which holds its bytes: a
  // mapped file's, or a meta stand-in for them).
  static Tensor from_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype);
  // Uninitialised contents (on the host: whatever the cache held).
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu(),
                      bool pinned = false);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32,
                     Device device = Device::cpu());
  // 0, 1, ..., n-1 as a 1-d tensor.
  static Tensor arange(int64_t n, DType dtype = DType::f32, Device device = Device::cpu());
  // Copies `values` (row-major, values.size() == numel(shape)) converting to `dtype`.
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape, DType dtype,
                            Device device = Device::cpu());
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape,
                            Device device = Device::cpu()) {
    return from_vector(values, shape, dtype_of<T>(), device);
  }
  // Row-major contents converted to T with the rules of tensor/convert.h (the same result
  // as going through double for floating dtypes). Copies device tensors to the host.
  // Throws on meta.
  template <class T>
  std::vector<T> to_vector() const;

  // ---- properties ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Strides& strides() const;
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return int64_t(shape().size()); }
  int64_t numel() const;
  int64_t offset() const;
  DType dtype() const;
  Device device() const;
  size_t nbytes() const { return size_t(numel()) * element_size(dtype()); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const;
  // Address of element 0 (storage data + offset). Throws on meta: there are no bytes.
  void* data_ptr() const;
  template <class T>
  T* data() const;  // checks that T matches the dtype
  // True when both tensors view the same Storage.
  bool shares_storage_with(const Tensor& other) const;
  bool same(const Tensor& other) const { return impl_ == other.impl_; }
  TensorImpl* impl() const { return impl_.get(); }

  // ---- element access (host tensors; converted through double) ----
  double item() const;  // a tensor of one element
  double at(const std::vector<int64_t>& index) const;
  void set(const std::vector<int64_t>& index, double value);

  // ---- views: share the storage, no copy ----
  // Elements start, start+step, ... < end along `dim`; negative start/end count from the
  // end and are clamped like Python slices. step > 0.
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;  // removes `dim`
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  // A view with the new shape; one size may be -1. Throws when the strides do not allow
  // a view (call reshape instead).
  Tensor view(const Shape& shape) const;
  // view() when possible, otherwise a contiguous copy.
  Tensor reshape(const Shape& shape) const;
  // Size-1 dims broadcast to `shape` with stride 0; -1 keeps a size. New leading dims allowed.
  Tensor expand(const Shape& shape) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;  // throws unless size(dim) == 1
  Tensor flatten() const { return reshape({numel()}); }

  // ---- copies ----
  // `this` itself when already contiguous, else a contiguous copy.
  Tensor contiguous() const;
  Tensor clone() const;
  // Converts to `dtype` (a new tensor; `this` when the dtype already matches).
  Tensor to(DType dtype) const;
  // Copies to `device` (a new tensor; `this` when already there).
  Tensor to(Device device) const;
  // The values on the host, contiguous, for host code to read: a host read on every device,
  // the CPU included (Note [Host reads] in tensor/host_reads.h). Throws for meta.
  Tensor read_host(const char* op) const;
  // Copies src into this (same shape; src may broadcast), converting dtype and device.
  // A no-op on meta. See Note [Device copies through the memcpy hook] in tensor.cpp.
  void copy_(const Tensor& src);
  void fill_(double value);

  std::string str() const;  // shape, dtype, device and (abridged) values

 private:
  TensorImpl& checked() const;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace fitgrad

#include "tensor/tensor_inl.h"
