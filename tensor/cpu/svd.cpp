// The truncated SVD basis on the host (see svd.h).
#include "tensor/cpu/svd.h"

#include <Eigen/Core>
#include <Eigen/SVD>
#include <cmath>

#include "tensor/convert.h"
#include "tensor/error.h"

namespace fitgrad::cpu {

void svd_basis(const void* a, DType a_dtype, int64_t m, int64_t n, int64_t r, bool left, void* out,
               DType out_dtype) {
  FG_CHECK(m >= 1 && n >= 1 && r >= 1 && r <= std::min(m, n),
           "[svd_basis] rank {} of a ({}, {}) matrix", r, m, n);
  Eigen::MatrixXd x(m, n);  // (m, n)
  dispatch_floating(a_dtype, "svd_basis", [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(a);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) x(i, j) = double(float(src[i * n + j]));
  });
  FG_CHECK(x.allFinite(), "[svd_basis] the ({}, {}) matrix has non-finite values", m, n);
  const Eigen::BDCSVD<Eigen::MatrixXd> svd(x, left ? Eigen::ComputeThinU : Eigen::ComputeThinV);
  // (m, k) or (n, k), k = min(m, n), columns by descending singular value.
  const Eigen::MatrixXd& vectors = left ? svd.matrixU() : svd.matrixV();
  const int64_t len = vectors.rows();
  dispatch_floating(out_dtype, "svd_basis", [&](auto tag) {
    using T = decltype(tag);
    T* dst = static_cast<T*>(out);
    for (int64_t j = 0; j < r; ++j) {
      // Note [Singular vector signs]: the first entry of largest magnitude is positive.
      int64_t top = 0;
      for (int64_t i = 1; i < len; ++i)
        if (std::fabs(vectors(i, j)) > std::fabs(vectors(top, j))) top = i;
      const double sign = vectors(top, j) < 0 ? -1.0 : 1.0;
      for (int64_t i = 0; i < len; ++i) {
        const T v = T(float(sign * vectors(i, j)));
        if (left)
          dst[i * r + j] = v;  // U (m, r)
        else
          dst[j * n + i] = v;  // Vh (r, n)
      }
    }
  });
}

}  // namespace fitgrad::cpu
