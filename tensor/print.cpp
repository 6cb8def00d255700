// Tensor::str() and operator<<: the values (abridged for large tensors) followed by the
// shape, dtype and device, laid out like PyTorch's repr:
//
//   tensor([[0.0000, 1.0000],
//           [2.0000, 3.0000]], shape=(2, 2), dtype=f32, device=cpu)
//
// See Note [Abridged printing].
#include <cmath>
#include <ostream>

#include "tensor/convert.h"
#include "tensor/tensor.h"

namespace fitgrad {

namespace {

// Note [Abridged printing]
// A tensor of more than kSummarizeAbove elements prints only the first and last
// kEdgeItems entries of every dim longer than 2 * kEdgeItems, with "..." between, as
// PyTorch does. Floating values print with 4 decimals, or in scientific notation when
// the largest magnitude shown is at least 1e8 or the smallest nonzero one is below
// 1e-4; all entries are padded to one width so columns line up. Device tensors are
// copied to the host first; meta tensors have no values and print "...".
constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr size_t kIndent = 7;  // strlen("tensor(")

class Printer {
 public:
  explicit Printer(const Tensor& host)
      : t_(host),
        summarize_(host.numel() > kSummarizeAbove),
        floating_(is_floating(host.dtype())) {}

  std::string values() {
    if (t_.numel() == 0) return "[]";
    collect(0, t_.offset());
    format_entries();
    std::string out;
    layout(0, t_.offset(), out);
    return out;
  }

 private:
  // The indices shown along dim d; -1 stands for "...".
  std::vector<int64_t> shown(int64_t d) const {
    const int64_t n = t_.size(d);
    std::vector<int64_t> idx;
    if (summarize_ && n > 2 * kEdgeItems) {
      for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
      idx.push_back(-1);
      for (int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
    } else {
      for (int64_t i = 0; i < n; ++i) idx.push_back(i);
    }
    return idx;
  }

  void collect(int64_t d, int64_t off) {
    if (d == t_.dim()) {
      dispatch_dtype(t_.dtype(), [&](auto tag) {
        using S = decltype(tag);
        const S v = static_cast<const S*>(t_.storage()->data())[off];
        if (floating_)
          reals_.push_back(convert<double>(v));
        else
          ints_.push_back(convert<int64_t>(v));
      });
      return;
    }
    for (int64_t i : shown(d))
      if (i >= 0) collect(d + 1, off + i * t_.stride(d));
  }

  void format_entries() {
    if (!floating_) {
      for (int64_t v : ints_) entries_.push_back(fmt::format("{}", v));
    } else {
      double largest = 0;
      double smallest = INFINITY;
      for (double v : reals_) {
        if (!std::isfinite(v) || v == 0) continue;
        largest = std::max(largest, std::fabs(v));
        smallest = std::min(smallest, std::fabs(v));
      }
      const bool sci = largest >= 1e8 || smallest < 1e-4;
      for (double v : reals_)
        entries_.push_back(sci ? fmt::format("{:.4e}", v) : fmt::format("{:.4f}", v));
    }
    for (const std::string& e : entries_) width_ = std::max(width_, e.size());
  }

  void layout(int64_t d, int64_t off, std::string& out) {
    if (d == t_.dim()) {
      const std::string& e = entries_[next_++];
      out.append(width_ - e.size(), ' ');
      out += e;
      return;
    }
    out += '[';
    const std::vector<int64_t> idx = shown(d);
    for (size_t j = 0; j < idx.size(); ++j) {
      if (j > 0) {
        if (d + 1 == t_.dim()) {
          out += ", ";
        } else {
          out += ',';
          out.append(size_t(t_.dim() - d - 1), '\n');
          out.append(kIndent + size_t(d) + 1, ' ');
        }
      }
      if (idx[j] < 0)
        out += "...";
      else
        layout(d + 1, off + idx[j] * t_.stride(d), out);
    }
    out += ']';
  }

  const Tensor& t_;
  bool summarize_;
  bool floating_;
  std::vector<double> reals_;
  std::vector<int64_t> ints_;
  std::vector<std::string> entries_;
  size_t width_ = 0;
  size_t next_ = 0;
};

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::string values = "...";
  if (device().has_bytes()) {
    const Tensor host = to(Device::cpu());
    values = Printer(host).values();
  }
  return fmt::format("tensor({}, shape={}, dtype={}, device={})", values, shape_str(shape()),
                     dtype_name(dtype()), device().str());
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace fitgrad
