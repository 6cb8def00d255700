// APOLLO's CPU kernel (see apollo.h).
#include "tensor/cpu/apollo.h"

#include <algorithm>
#include <cmath>

#include "tensor/convert.h"
#include "tensor/cpu/param_store.h"

namespace fitgrad::cpu {
namespace {

using backend::ApolloArgs;

constexpr int64_t kTile = 512;  // channels per task of a left projection's moment pass

// The Adam step of one low-rank value: updates m and v, returns N = m / (sqrt(v) + eps).
inline float adam_value(const backend::ApolloScalars& k, float r, float& m, float& v) {
  m = m * k.beta1 + k.one_minus_beta1 * r;
  v = v * k.beta2 + k.one_minus_beta2 * r * r;
  return m / (std::sqrt(v) + k.eps);
}

// The scale of a channel from its sums of N^2 and R^2, rounded to f32.
inline double channel_scale(double update_sq, double low_sq) {
  return double(float(std::sqrt(update_sq) / (std::sqrt(low_sq) + 1e-8)));
}

template <class P, class G>
class Update {
 public:
  Update(const ApolloArgs& a, P* p, const G* g)
      : a_(a),
        k_(a.k),
        p_(p),
        g_(g),
        low_(a.low.data<G>()),
        m_(a.exp_avg.data<float>()),
        v_(a.exp_avg_sq.data<float>()),
        layout_(backend::apollo_workspace(a.rows, a.cols, a.k.right)),
        w_(reinterpret_cast<double*>(a.workspace.data<float>())),
        channels_(a.k.right ? a.rows : a.cols) {}

  void run() {
    moments();
    scales();
    double total = 0.0;
    row_sums();
    for (int64_t r = 0; r < a_.rows; ++r) total += w_[layout_.row_sums + r];
    const double n = std::sqrt(total);
    float* norm = a_.norm.data<float>();
    const double limiter =
        k_.first ? 1.0 : std::max(n / (double(*norm) + 1e-8), k_.growth) / k_.growth;
    *norm = float(n / limiter);
    apply(float(k_.step / limiter));
  }

 private:
  // The moments of every low-rank value, and each channel's sums of N^2 and R^2.
  void moments() {
    double* nsq = w_ + layout_.update_sums;
    double* rsq = w_ + layout_.low_sums;
    const int64_t rank = a_.rank;
    if (k_.right) {  // channel c is row c of low (rows, rank)
#pragma omp parallel for schedule(static)
      for (int64_t c = 0; c < channels_; ++c) {
        double sn = 0.0, sr = 0.0;
        for (int64_t j = c * rank; j < (c + 1) * rank; ++j) {
          const float r = float(low_[j]);
          const double u = adam_value(k_, r, m_[j], v_[j]);
          sn += u * u;
          sr += double(r) * double(r);
        }
        nsq[c] = sn;
        rsq[c] = sr;
      }
      return;
    }
    // channel c is column c of low (rank, cols): each task walks the rank rows of a tile
    const int64_t tiles = (channels_ + kTile - 1) / kTile;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t c0 = t * kTile, c1 = std::min(channels_, c0 + kTile);
      std::fill(nsq + c0, nsq + c1, 0.0);
      std::fill(rsq + c0, rsq + c1, 0.0);
      for (int64_t i = 0; i < rank; ++i)
        for (int64_t c = c0; c < c1; ++c) {
          const int64_t j = i * channels_ + c;
          const float r = float(low_[j]);
          const double u = adam_value(k_, r, m_[j], v_[j]);
          nsq[c] += u * u;
          rsq[c] += double(r) * double(r);
        }
    }
  }

  // Each channel's f32 scale in place of its sum of N^2, or the one tensor-wise scale.
  void scales() {
    double* nsq = w_ + layout_.update_sums;
    const double* rsq = w_ + layout_.low_sums;
    if (k_.tensor_wise) {
      double sn = 0.0, sr = 0.0;
      for (int64_t c = 0; c < channels_; ++c) {
        sn += nsq[c];
        sr += rsq[c];
      }
      w_[layout_.scale] = channel_scale(sn, sr);
      return;
    }
    for (int64_t c = 0; c < channels_; ++c) nsq[c] = channel_scale(nsq[c], rsq[c]);
  }

  // The f32 scale of element (r, c).
  float scale_at(int64_t r, int64_t c) const {
    if (k_.tensor_wise) return float(w_[layout_.scale]);
    return float(w_[layout_.update_sums + (k_.right ? r : c)]);
  }

  // Each row's sum of (g s)^2, in eight interleaved partials added in a fixed order.
  void row_sums() {
    const int64_t cols = a_.cols;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < a_.rows; ++r) {
      const G* g = g_ + r * cols;
      double acc[8] = {};
      for (int64_t c = 0; c < cols; ++c) {
        const double x = double(float(g[c])) * double(scale_at(r, c));
        acc[c % 8] += x * x;
      }
      w_[layout_.row_sums + r] =
          ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
  }

  // p = p - coef (s g), then p * decay.
  void apply(float coef) {
    const int64_t cols = a_.cols;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < a_.rows; ++r) {
      ParamRounder<P> out(a_.sr);
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = r * cols + c;
        const float x = float(p_[i]) - coef * (scale_at(r, c) * float(g_[i]));
        p_[i] = out.round(i, k_.weight_decay ? x * k_.decay : x);
      }
    }
  }

  const ApolloArgs& a_;
  const backend::ApolloScalars& k_;
  P* p_;
  const G* g_;
  const G* low_;
  float* m_;
  float* v_;
  backend::ApolloWorkspace layout_;
  double* w_;
  int64_t channels_;
};

}  // namespace

void apollo_update(const ApolloArgs& a) {
  dispatch_floating(a.param.dtype(), "apollo_update", [&](auto p_tag) {
    dispatch_floating(a.grad.dtype(), "apollo_update", [&](auto g_tag) {
      Update(a, a.param.data<decltype(p_tag)>(), a.grad.data<decltype(g_tag)>()).run();
    });
  });
}

}  // namespace fitgrad::cpu
