// Declared optimizer state (Note [Declared optimizer state] in optim/state_spec.h), checked
// with two test-only optimizers whose state is not an f32 copy of the parameter: one keeps
// its momentum as u8 codes with an f32 absmax per block (small tensors keep f32 state), one
// keeps a factored second moment (a row and a column vector for a matrix, a full vector
// otherwise). For each: the ledger holds exactly the declared bytes under the declared
// labels, the state survives a safetensors file and a load into a fresh optimizer (the
// continued runs are bitwise equal to the uninterrupted one), and a load whose entry has
// the wrong dtype or shape names it and changes nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>

#include "autograd/variable.h"
#include "io/safetensors.h"
#include "optim/optimizer.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/scope.h"
#include "tests/tensor/memory/events_since.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::optim {
namespace {

using ::testing::HasSubstr;
using testing::random_tensor;
using testing::to_f64;

constexpr int64_t kBlock = 16;         // values per absmax block
constexpr int64_t kMinQuantized = 64;  // smaller tensors keep f32 state

// m <- 0.9 m + g, p <- p - lr m, with m stored as round(127 m / absmax) + 128 per block.
class Momentum8 : public Optimizer {
 public:
  Momentum8(std::vector<ParamGroup> groups, double lr)
      : Optimizer(std::move(groups), lr, "momentum8", specs) {}
  std::string name() const override { return "momentum8"; }

  static std::vector<StateSpec> specs(const std::string&, const Tensor& p) {
    if (p.numel() < kMinQuantized) return {{.name = "momentum", .shape = p.shape()}};
    return {{.name = "state1", .shape = {p.numel()}, .dtype = DType::u8, .init = 128.0},
            {.name = "absmax1", .shape = {(p.numel() + kBlock - 1) / kBlock}}};
  }

 protected:
  void update(size_t i, const ParamGroup&, const std::string&, const Tensor& p,
              const Tensor& g) override {
    ParamStates::State& s = states_.begin_update(i);
    float* w = p.data<float>();
    const float* grad = g.data<float>();
    const int64_t n = p.numel();
    if (s.buffers.size() == 1) {
      float* m = s.buffers[0].data<float>();
      for (int64_t k = 0; k < n; ++k) {
        m[k] = 0.9f * m[k] + grad[k];
        w[k] -= float(lr_) * m[k];
      }
      return;
    }
    uint8_t* code = s.buffers[0].data<uint8_t>();
    float* absmax = s.buffers[1].data<float>();
    for (int64_t b = 0; b * kBlock < n; ++b) {
      const int64_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
      float m[kBlock], top = 0;
      for (int64_t k = lo; k < hi; ++k) {
        m[k - lo] = 0.9f * (float(int(code[k]) - 128) / 127.0f * absmax[b]) + grad[k];
        top = std::max(top, std::fabs(m[k - lo]));
        w[k] -= float(lr_) * m[k - lo];
      }
      absmax[b] = top;
      for (int64_t k = lo; k < hi; ++k)
        code[k] = uint8_t(128 + std::lround(top > 0 ? 127.0f * m[k - lo] / top : 0.0f));
    }
  }
};

// v_row <- 0.9 v_row + 0.1 mean_cols(g^2), v_col likewise; p <- p - lr g / sqrt(v_hat + eps)
// with v_hat = v_row v_col / mean(v_row). A vector keeps a full v.
class Factored : public Optimizer {
 public:
  Factored(std::vector<ParamGroup> groups, double lr)
      : Optimizer(std::move(groups), lr, "factored", specs) {}
  std::string name() const override { return "factored"; }

  static std::vector<StateSpec> specs(const std::string&, const Tensor& p) {
    if (p.dim() != 2) return {{.name = "v", .shape = p.shape()}};
    return {{.name = "v_row", .shape = {p.size(0)}}, {.name = "v_col", .shape = {p.size(1)}}};
  }

 protected:
  void update(size_t i, const ParamGroup&, const std::string&, const Tensor& p,
              const Tensor& g) override {
    ParamStates::State& s = states_.begin_update(i);
    float* w = p.data<float>();
    const float* grad = g.data<float>();
    constexpr float eps = 1e-6f;
    if (s.buffers.size() == 1) {
      float* v = s.buffers[0].data<float>();
      for (int64_t k = 0; k < p.numel(); ++k) {
        v[k] = 0.9f * v[k] + 0.1f * grad[k] * grad[k];
        w[k] -= float(lr_) * grad[k] / std::sqrt(v[k] + eps);
      }
      return;
    }
    const int64_t rows = p.size(0), cols = p.size(1);
    float* vr = s.buffers[0].data<float>();
    float* vc = s.buffers[1].data<float>();
    std::vector<float> row_sq(size_t(rows), 0.0f), col_sq(size_t(cols), 0.0f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float gg = grad[r * cols + c] * grad[r * cols + c];
        row_sq[size_t(r)] += gg / float(cols);
        col_sq[size_t(c)] += gg / float(rows);
      }
    float row_mean = 0;
    for (int64_t r = 0; r < rows; ++r) {
      vr[r] = 0.9f * vr[r] + 0.1f * row_sq[size_t(r)];
      row_mean += vr[r] / float(rows);
    }
    for (int64_t c = 0; c < cols; ++c) vc[c] = 0.9f * vc[c] + 0.1f * col_sq[size_t(c)];
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        w[r * cols + c] -=
            float(lr_) * grad[r * cols + c] / std::sqrt(vr[r] * vc[c] / row_mean + eps);
  }
};

using Params = std::vector<std::pair<std::string, Tensor>>;

Params make_params() {
  Params out = {{"w", random_tensor({12, 20}, 1)},   // 240 values: 15 blocks of 16
                {"odd", random_tensor({7, 11}, 2)},  // 77 values: a final partial block
                {"b", random_tensor({20}, 3)}};      // small: f32 state
  for (auto& [name, t] : out) autograd::set_requires_grad(t);
  return out;
}

Params copy_of(const Params& params) {
  Params out;
  for (const auto& [name, t] : params) {
    out.emplace_back(name, t.clone());
    autograd::set_requires_grad(out.back().second);
  }
  return out;
}

void set_grads(const Params& params, int k) {
  uint64_t seed = 1000 + 10 * uint64_t(k);
  for (const auto& [name, p] : params)
    autograd::ensure_meta(p).grad = random_tensor(p.shape(), seed++);
}

template <class Opt>
std::unique_ptr<Optimizer> make(const Params& params) {
  return std::make_unique<Opt>(std::vector<ParamGroup>{{.params = params}}, 0.01);
}

std::map<std::string, std::vector<double>> values(const std::map<std::string, Tensor>& state) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, t] : state) out[name] = to_f64(t);
  return out;
}

std::map<std::string, std::vector<double>> values(const Params& params) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, t] : params) out[name] = to_f64(t);
  return out;
}

// Runs 3 steps, saves the state to a safetensors file, loads it into a fresh optimizer over
// copies of the parameters, and runs 2 more steps on both: everything stays bitwise equal.
template <class Opt>
void check_round_trip() {
  const Params params = make_params();
  const auto opt = make<Opt>(params);
  for (int k = 0; k < 3; ++k) {
    set_grads(params, k);
    opt->step();
  }
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("fitgrad-state-spec-" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  const std::map<std::string, Tensor> saved = opt->state_dict();
  io::save_safetensors(path, {saved.begin(), saved.end()});

  const Params resumed = copy_of(params);
  const auto opt2 = make<Opt>(resumed);
  opt2->load_state_dict(io::SafetensorsFile::open(path).tensors());
  std::filesystem::remove(path);
  EXPECT_EQ(values(opt2->state_dict()), values(saved));
  EXPECT_EQ(opt2->steps(), 3);
  for (int k = 3; k < 5; ++k) {
    set_grads(params, k);
    set_grads(resumed, k);
    opt->step();
    opt2->step();
  }
  EXPECT_EQ(values(resumed), values(params));
  EXPECT_EQ(values(opt2->state_dict()), values(opt->state_dict()));
}

TEST(StateSpec, Uint8StateWithAbsmaxRoundTripsThroughAFile) { check_round_trip<Momentum8>(); }
TEST(StateSpec, FactoredStateRoundTripsThroughAFile) { check_round_trip<Factored>(); }

// The ledger holds exactly the declared tensors: one allocation per spec, labelled
// "<param>.<spec>", in the optimizer_state category, of the declared bytes.
TEST(StateSpec, TheLedgerHoldsExactlyTheDeclaredState) {
  for (const bool factored : {false, true}) {
    const Params params = make_params();
    const auto opt = factored ? make<Factored>(params) : make<Momentum8>(params);
    set_grads(params, 0);
    const uint64_t first = allocator_for(Device::cpu()).total_events();
    opt->step();
    std::vector<std::pair<std::string, uint64_t>> seen, declared;
    for (const MemoryEvent& e : testing::allocations_since(first))
      if (e.category == Category::optimizer_state)
        seen.emplace_back(label_text(e.label), e.requested);
    int64_t total = 0;
    for (size_t i = 0; i < opt->num_params(); ++i) {
      for (const StateSpec& s : opt->state_specs(i))
        declared.emplace_back(params[i].first + "." + s.name, uint64_t(state_bytes({s})));
      total += state_bytes(opt->state_specs(i));
    }
    EXPECT_EQ(seen, declared);
    // w: 240 u8 + 15 f32 absmax; odd: 77 u8 + 5 absmax; b: 20 f32.
    EXPECT_EQ(total, factored ? (12 + 20 + 11 + 7 + 20) * 4 : 240 + 15 * 4 + 77 + 5 * 4 + 20 * 4);
  }
}

TEST(StateSpec, ALoadAgainstTheSpecsNamesEachCulpritAndChangesNothing) {
  const Params params = make_params();
  const auto opt = make<Momentum8>(params);
  set_grads(params, 0);
  opt->step();
  const auto before = values(opt->state_dict());

  std::map<std::string, Tensor> bad = opt->state_dict();
  for (auto& [name, t] : bad) t = t.clone();
  bad["w.state1"] = Tensor::zeros({240}, DType::f32);  // codes must stay u8
  bad["odd.absmax1"] = Tensor::zeros({4});             // 77 values need 5 blocks
  try {
    opt->load_state_dict(bad);
    ADD_FAILURE() << "the load was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'w.state1' is f32, expected u8"));
    EXPECT_THAT(e.what(), HasSubstr("'odd.absmax1' has shape (4), expected (5)"));
  }
  EXPECT_EQ(values(opt->state_dict()), before);
}

// Placement: host state lives on the CPU whatever the parameter's device, except in a dry
// run, where nothing real may be allocated.
TEST(StateSpec, HostPlacementPutsTheStateInHostMemory) {
  const StateSpec host{.name = "v", .shape = {4}, .placement = StatePlacement::host};
  const StateSpec with{.name = "m", .shape = {4}};
  EXPECT_EQ(state_device(host, Device::cuda(1)), Device::cpu());
  EXPECT_EQ(state_device(with, Device::cuda(1)), Device::cuda(1));
  EXPECT_EQ(state_device(host, Device::meta()), Device::meta());
  EXPECT_EQ(state_bytes({host, with, {.name = "c", .shape = {3, 5}, .dtype = DType::u8}}),
            4 * 4 + 4 * 4 + 15);
}

}  // namespace
}  // namespace fitgrad::optim
