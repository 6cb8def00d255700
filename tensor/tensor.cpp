// Tensor creation, properties, element access and copies (views are in view.cpp, printing
// in print.cpp). Copies resolve every operand to a base address, offset and strides here
// and dispatch the host copy and fill through the cpu kernel table, or move bytes through
// the device hook in device_copy.h. See Note [Device copies through the memcpy hook].
#include "tensor/tensor.h"

#include <initializer_list>

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/convert.h"
#include "tensor/device_copy.h"
#include "tensor/host_reads.h"

namespace fitgrad {

// Note [Device copies through the memcpy hook]
// tensor/ has no CUDA kernels, only a byte copy registered by the backend. So every copy
// that involves a device is arranged to be one plain memcpy of contiguous bytes:
//   - host -> device: broadcast, cast and make contiguous on the host, then memcpy into
//     a contiguous destination;
//   - device -> host: a contiguous source is one memcpy. A strided source copies the
//     storage span it covers (from its first to its last element) to the host and
//     gathers there, so printing or reading a device view always works;
//   - device -> device: one memcpy when contiguous, same shape and same dtype; to() of
//     a strided tensor to another device gathers on the host first.
// Anything else (a dtype conversion on the device, a strided write, a device-side
// gather) needs a device kernel. tensor/ then throws an Error naming the op and the
// device rather than silently round-tripping through the host.

namespace {

const char* backend_name(Device device) {
  switch (device.type) {
    case DeviceType::cpu: return "cpu";
    case DeviceType::cuda: return "cuda";
    case DeviceType::meta: return "meta";
  }
  return "?";
}

backend::StridedOperand operand(const Tensor& t, Strides strides) {
  return {t.storage()->data(), t.offset(), std::move(strides), t.dtype()};
}

// Host-to-host copy with dtype conversion; src already has dst's shape.
void copy_on_host(const Tensor& dst, const Tensor& src) {
  Shape shape = dst.shape();
  Strides dst_strides = dst.strides();
  Strides src_strides = src.strides();
  if (fitgrad::numel(shape) > 0) {
    std::vector<Strides> both{std::move(dst_strides), std::move(src_strides)};
    collapse_dims(shape, both);
    dst_strides = std::move(both[0]);
    src_strides = std::move(both[1]);
  }
  backend::dispatch(backend::OpId::copy, Device::cpu(),
                    backend::CopyArgs{shape, operand(dst, std::move(dst_strides)),
                                      operand(src, std::move(src_strides))});
}

bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d)
    if (from[d] != to[lead + d] && from[d] != 1) return false;
  return true;
}

// dst <- src, converting dtype and moving between devices; `op` names the caller.
void copy_into(const Tensor& dst, Tensor src, const char* op) {
  FG_CHECK(broadcasts_to(src.shape(), dst.shape()),
           "[{}] cannot copy a source of shape {} into a destination of shape {}", op,
           shape_str(src.shape()), shape_str(dst.shape()));
  dst.storage()->bump_version();
  const Device dd = dst.device();
  const Device sd = src.device();
  if (!dd.has_bytes()) return;  // meta: allocations only
  FG_CHECK(sd.has_bytes(), "[{}] a meta tensor has no data to copy to {}", op, dd.str());
  for (int64_t d = 0; d < dst.dim(); ++d)
    FG_CHECK(dst.stride(d) != 0 || dst.size(d) <= 1,
             "[{}] the destination of shape {} is an expanded view (stride 0 in dim {}): "
             "its elements alias one another",
             op, shape_str(dst.shape()), d);
  if (dst.numel() == 0) return;
  // An overlapping source would be overwritten while it is read.
  if (src.shares_storage_with(dst)) src = src.clone();

  if (dd.type == DeviceType::cpu) {
    const Tensor host = sd.type == DeviceType::cpu ? src : src.to(Device::cpu());
    copy_on_host(dst, host.expand(dst.shape()));
    return;
  }
  FG_CHECK(dst.is_contiguous(),
           "[{}] a strided write into {} (shape {}, strides {}) is not implemented by the {} "
           "backend",
           op, dd.str(), shape_str(dst.shape()), shape_str(dst.strides()), backend_name(dd));
  if (sd.type == DeviceType::cpu) {
    Tensor staged = src;
    if (src.shape() != dst.shape() || src.dtype() != dst.dtype() || !src.is_contiguous()) {
      staged = Tensor::empty(dst.shape(), dst.dtype());
      copy_on_host(staged, src.expand(dst.shape()));
    }
    device_memcpy(dst.data_ptr(), dd, staged.data_ptr(), sd, dst.nbytes(), op);
    if (staged.storage()->pinned()) staged.storage()->record_stream(pinned_copy_stream(dd));
    return;
  }
  FG_CHECK(src.dtype() == dst.dtype(),
           "[{}] dtype conversion on {} is not implemented by the {} backend ({} to {})", op,
           sd.str(), backend_name(sd), dtype_name(src.dtype()), dtype_name(dst.dtype()));
  FG_CHECK(src.shape() == dst.shape() && src.is_contiguous(),
           "[{}] a strided or broadcasting copy from {} (shape {}, strides {}) is not "
           "implemented by the {} backend",
           op, sd.str(), shape_str(src.shape()), shape_str(src.strides()), backend_name(sd));
  device_memcpy(dst.data_ptr(), dd, src.data_ptr(), sd, dst.nbytes(), op);
}

// A device tensor with arbitrary strides, copied to a contiguous host tensor.
Tensor gather_to_host(const Tensor& src) {
  Tensor out = Tensor::empty(src.shape(), src.dtype());
  if (src.numel() == 0) return out;
  if (src.is_contiguous()) {
    device_memcpy(out.data_ptr(), out.device(), src.data_ptr(), src.device(), src.nbytes(), "to");
    return out;
  }
  // The storage span from the lowest to the highest element address; views never have
  // negative strides, so the lowest is element 0.
  int64_t last = 0;
  for (int64_t d = 0; d < src.dim(); ++d) last += src.stride(d) * (src.size(d) - 1);
  const Tensor span = Tensor::empty({last + 1}, src.dtype());
  device_memcpy(span.data_ptr(), span.device(), src.data_ptr(), src.device(), span.nbytes(), "to");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = span.storage();
  impl->shape = src.shape();
  impl->strides = src.strides();
  impl->dtype = src.dtype();
  copy_on_host(out, Tensor(std::move(impl)));
  return out;
}

// A 0-d view of one element; `op` names the caller in errors.
Tensor element(const Tensor& t, const std::vector<int64_t>& index, const char* op) {
  FG_CHECK(int64_t(index.size()) == t.dim(), "[{}] an index of {} entries for a tensor of shape {}",
           op, index.size(), shape_str(t.shape()));
  Tensor e = t;
  for (size_t d = 0; d < index.size(); ++d) {
    const int64_t size = t.size(int64_t(d));
    const int64_t i = index[d] < 0 ? index[d] + size : index[d];
    FG_CHECK(i >= 0 && i < size, "[{}] index {} is out of range for dim {} of shape {}", op,
             index[d], d, shape_str(t.shape()));
    e = e.select(0, i);
  }
  return e;
}

double read_scalar(const Tensor& e, const char* op) {
  FG_CHECK(e.device().has_bytes(), "[{}] meta tensors have no data", op);
  const Tensor host = e.read_host(op);
  return dispatch_dtype(host.dtype(), [&](auto tag) {
    using S = decltype(tag);
    return convert<double>(*static_cast<const S*>(host.data_ptr()));
  });
}

}  // namespace

// ---- creation ----

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype) {
  FG_CHECK(storage && storage->nbytes() == size_t(fitgrad::numel(shape)) * element_size(dtype),
           "[from_storage] {} bytes for {} {}", storage ? storage->nbytes() : 0, dtype_name(dtype),
           shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, bool pinned) {
  const int64_t n = fitgrad::numel(shape);
  return from_storage(Storage::allocate(size_t(n) * element_size(dtype), device, pinned), shape,
                      dtype);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

Tensor Tensor::arange(int64_t n, DType dtype, Device device) {
  FG_CHECK(n >= 0, "[arange] the length must be non-negative, got {}", n);
  if (!device.has_bytes()) return empty({n}, dtype, device);
  Tensor host = empty({n}, dtype);
  dispatch_dtype(dtype, [&](auto tag) {
    using S = decltype(tag);
    S* out = static_cast<S*>(host.data_ptr());
    for (int64_t i = 0; i < n; ++i) out[i] = convert<S>(i);
  });
  return host.to(device);
}

// ---- properties ----

TensorImpl& Tensor::checked() const {
  FG_CHECK(impl_ != nullptr, "[tensor] use of an undefined tensor");
  return *impl_;
}

const Shape& Tensor::shape() const { return checked().shape; }
const Strides& Tensor::strides() const { return checked().strides; }
int64_t Tensor::size(int64_t dim) const {
  return shape()[size_t(wrap_dim(dim, this->dim(), "size"))];
}
int64_t Tensor::stride(int64_t dim) const {
  return strides()[size_t(wrap_dim(dim, this->dim(), "stride"))];
}
int64_t Tensor::numel() const { return fitgrad::numel(shape()); }
int64_t Tensor::offset() const { return checked().offset; }
DType Tensor::dtype() const { return checked().dtype; }
Device Tensor::device() const { return checked().storage->device(); }
bool Tensor::is_contiguous() const { return fitgrad::is_contiguous(shape(), strides()); }
const std::shared_ptr<Storage>& Tensor::storage() const { return checked().storage; }

void* Tensor::data_ptr() const {
  const TensorImpl& impl = checked();
  FG_CHECK(impl.storage->has_bytes(), "[data_ptr] meta tensors have no data");
  char* base = static_cast<char*>(impl.storage->data());
  if (base == nullptr) return nullptr;  // a 0-byte storage
  return base + impl.offset * int64_t(element_size(impl.dtype));
}

bool Tensor::shares_storage_with(const Tensor& other) const {
  return defined() && other.defined() && storage() == other.storage();
}

// ---- element access ----

double Tensor::item() const {
  FG_CHECK(numel() == 1, "[item] a tensor of shape {} has {} elements, not one", shape_str(shape()),
           numel());
  return read_scalar(element(*this, std::vector<int64_t>(size_t(dim()), 0), "item"), "item");
}

double Tensor::at(const std::vector<int64_t>& index) const {
  return read_scalar(element(*this, index, "at"), "at");
}

void Tensor::set(const std::vector<int64_t>& index, double value) {
  Tensor e = element(*this, index, "set");
  FG_CHECK(e.device().has_bytes(), "[set] meta tensors have no data");
  e.fill_(value);
}

// ---- copies ----

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  Tensor out = empty(shape(), dtype(), device());
  copy_into(out, *this, "contiguous");
  return out;
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  copy_into(out, *this, "clone");
  return out;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == this->dtype()) return *this;
  const Device dev = device();
  FG_CHECK(dev.type != DeviceType::cuda,
           "[to] dtype conversion on {} is not implemented by the {} backend ({} to {})", dev.str(),
           backend_name(dev), dtype_name(this->dtype()), dtype_name(dtype));
  Tensor out = empty(shape(), dtype, dev);
  copy_into(out, *this, "to");
  return out;
}

Tensor Tensor::to(Device device) const {
  const Device from = this->device();
  if (device == from) return *this;
  if (!device.has_bytes()) return empty(shape(), dtype(), device);
  FG_CHECK(from.has_bytes(), "[to] a meta tensor of shape {} has no data to copy to {}",
           shape_str(shape()), device.str());
  require_device_memcpy(device, "to");
  require_device_memcpy(from, "to");
  if (device.type == DeviceType::cpu) {
    count_host_read();  // Note [Host reads]
    return gather_to_host(*this);
  }
  Tensor src = *this;
  if (from.type == DeviceType::cpu)
    src = contiguous();
  else if (!is_contiguous())
    src = gather_to_host(*this);
  Tensor out = empty(shape(), dtype(), device);
  device_memcpy(out.data_ptr(), device, src.data_ptr(), src.device(), out.nbytes(), "to");
  if (src.device().type == DeviceType::cpu && src.storage()->pinned())
    src.storage()->record_stream(pinned_copy_stream(device));  // Note [Pinned copies in flight]
  return out;
}

Tensor Tensor::read_host(const char* op) const {
  FG_CHECK(device().has_bytes(), "[{}] a meta tensor of shape {} has no values to read", op,
           shape_str(shape()));
  if (device().type != DeviceType::cpu) return to(Device::cpu()).contiguous();  // counted there
  count_host_read();                                                            // Note [Host reads]
  return contiguous();
}

void Tensor::copy_(const Tensor& src) { copy_into(*this, src, "copy_"); }

void Tensor::fill_(double value) {
  storage()->bump_version();
  const Device dev = device();
  if (!dev.has_bytes() || numel() == 0) return;
  // The backend's kernel, on the device: no host buffer, no wait. A backend with only a
  // byte copy (a test's) gets the values copied from the host.
  if (backend::has_kernel(dev.type, backend::OpId::fill)) {
    Shape shape = this->shape();
    std::vector<Strides> strides{this->strides()};
    collapse_dims(shape, strides);
    backend::dispatch(backend::OpId::fill, dev,
                      backend::FillArgs{shape, operand(*this, std::move(strides[0])), value});
    return;
  }
  FG_CHECK(is_contiguous(),
           "[fill_] a strided fill of {} (shape {}) is not implemented by the {} backend",
           dev.str(), shape_str(shape()), backend_name(dev));
  const Tensor host = full(shape(), value, dtype());
  device_memcpy(data_ptr(), dev, host.data_ptr(), host.device(), nbytes(), "fill_");
}

}  // namespace fitgrad
