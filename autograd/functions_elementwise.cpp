// Differentiable elementwise ops, activations, casts and reductions (functions.h).
#include "autograd/functions.h"
#include "autograd/lambda_node.h"
#include "tensor/ops/activation.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"

namespace fitgrad::autograd {

using Grads = std::vector<Tensor>;

namespace {

// A gradient reduced back to its operand's shape and dtype (a bf16 operand of a promoted
// f32 op gets a bf16 gradient, as in PyTorch).
Tensor back_to(const Tensor& g, const Shape& shape, DType dtype) {
  return g.defined() ? ops::sum_to(g, shape).to(dtype) : g;
}

// A binary op with broadcasting and dtype promotion: gradients are reduced back to each
// operand's shape and dtype.
template <class Forward, class Rule>
Tensor binary(const char* name, const Tensor& a, const Tensor& b, Forward forward, Rule rule,
              bool save_inputs, bool save_output) {
  const bool rec = needs_record({&a, &b});
  Tensor out;
  {
    ForwardScope scope(rec);
    out = forward(a, b);
  }
  if (!rec) return out;
  auto n = make_node(name, [rule, sa = a.shape(), sb = b.shape(), ta = a.dtype(), tb = b.dtype()](
                               Node& node, Grads& g) {
    auto [da, db] = rule(node, g[0]);
    return Grads{back_to(da, sa, ta), back_to(db, sb, tb)};
  });
  if (save_inputs) {
    n->save(a);
    n->save(b);
  }
  if (save_output) n->save(out);
  record(n, {&a, &b}, {&out});
  return out;
}

// A unary op whose rule reads the input (saved[0]) or the output (saved[0]).
enum class Keep { input, output, nothing };

template <class Forward, class Rule>
Tensor unary(const char* name, const Tensor& x, Forward forward, Rule rule, Keep keep) {
  const bool rec = needs_record({&x});
  Tensor out;
  {
    ForwardScope scope(rec);
    out = own(forward(x), x);
  }
  if (!rec) return out;
  auto n = make_node(name, [rule](Node& node, Grads& g) { return Grads{rule(node, g[0])}; });
  if (keep == Keep::input) n->save(x);
  if (keep == Keep::output) n->save(out);
  record(n, {&x}, {&out});
  return out;
}

// The gradient of a reduction: g put back at the reduced dims (size 1) and expanded to the
// input's shape as a stride-0 view.
Tensor expand_back(const Tensor& g, const Shape& in, const std::vector<int64_t>& dims,
                   bool keepdim) {
  Shape kept = in;
  if (dims.empty()) {
    std::fill(kept.begin(), kept.end(), 1);
  } else {
    for (int64_t d : dims) kept[size_t(wrap_dim(d, int64_t(in.size()), "sum"))] = 1;
  }
  return (keepdim ? g : g.reshape(kept)).expand(in);
}

// Elements per output of a reduction over `dims` (all dims when empty).
double reduced_count(const Shape& in, const std::vector<int64_t>& dims) {
  if (dims.empty()) return double(numel(in));
  double n = 1;
  for (int64_t d : dims) n *= double(in[size_t(wrap_dim(d, int64_t(in.size()), "mean"))]);
  return n;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return binary(
      "add", a, b, ops::add,
      [](Node&, const Tensor& g) {
        return std::pair{g, g};
      },
      false, false);
}

Tensor sub(const Tensor& a, const Tensor& b) {
  return binary(
      "sub", a, b, ops::sub,
      [](Node&, const Tensor& g) {
        return std::pair{g, ops::neg(g)};
      },
      false, false);
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return binary(
      "mul", a, b, ops::mul,
      [](Node& n, const Tensor& g) {
        return std::pair{ops::mul(g, n.saved[1]), ops::mul(g, n.saved[0])};
      },
      true, false);
}

Tensor div(const Tensor& a, const Tensor& b) {
  // d(a/b)/da = 1/b; d(a/b)/db = -(a/b)/b. saved: a, b, out.
  return binary(
      "div", a, b, ops::div,
      [](Node& n, const Tensor& g) {
        const Tensor da = ops::div(g, n.saved[1]);
        return std::pair{da, ops::neg(ops::mul(da, n.saved[2]))};
      },
      true, true);
}

Tensor scale(const Tensor& a, double s) {
  return unary(
      "scale", a, [s](const Tensor& x) { return ops::scale(x, s); },
      [s](Node&, const Tensor& g) { return ops::scale(g, s); }, Keep::nothing);
}

Tensor add_scalar(const Tensor& a, double s) {
  return unary(
      "add_scalar", a, [s](const Tensor& x) { return ops::add_scalar(x, s); },
      [](Node&, const Tensor& g) { return g; }, Keep::nothing);
}

Tensor neg(const Tensor& a) {
  return unary(
      "neg", a, ops::neg, [](Node&, const Tensor& g) { return ops::neg(g); }, Keep::nothing);
}

Tensor exp(const Tensor& a) {
  return unary(
      "exp", a, ops::exp, [](Node& n, const Tensor& g) { return ops::mul(g, n.saved[0]); },
      Keep::output);
}

Tensor tanh(const Tensor& a) {
  // d tanh = 1 - tanh^2: g - g y y from the output y.
  return unary(
      "tanh", a, ops::tanh,
      [](Node& n, const Tensor& g) {
        const Tensor& y = n.saved[0];
        return ops::sub(g, ops::mul(ops::mul(g, y), y));
      },
      Keep::output);
}

Tensor log(const Tensor& a) {
  return unary(
      "log", a, ops::log, [](Node& n, const Tensor& g) { return ops::div(g, n.saved[0]); },
      Keep::input);
}

Tensor sqrt(const Tensor& a) {
  return unary(
      "sqrt", a, ops::sqrt,
      [](Node& n, const Tensor& g) { return ops::div(ops::scale(g, 0.5), n.saved[0]); },
      Keep::output);
}

Tensor rsqrt(const Tensor& a) {
  // d/dx x^-1/2 = -1/2 x^-3/2 = -1/2 y^3.
  return unary(
      "rsqrt", a, ops::rsqrt,
      [](Node& n, const Tensor& g) {
        const Tensor& y = n.saved[0];
        return ops::mul(ops::scale(g, -0.5), ops::mul(y, ops::mul(y, y)));
      },
      Keep::output);
}

Tensor pow(const Tensor& a, double p) {
  return unary(
      "pow", a, [p](const Tensor& x) { return ops::pow(x, p); },
      [p](Node& n, const Tensor& g) {
        return ops::mul(ops::scale(g, p), ops::pow(n.saved[0], p - 1));
      },
      Keep::input);
}

Tensor gelu(const Tensor& x) {
  return unary(
      "gelu", x, ops::gelu,
      [](Node& n, const Tensor& g) { return ops::gelu_backward(g, n.saved[0]); }, Keep::input);
}

Tensor silu(const Tensor& x) {
  return unary(
      "silu", x, ops::silu,
      [](Node& n, const Tensor& g) { return ops::silu_backward(g, n.saved[0]); }, Keep::input);
}

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  const bool rec = needs_record({&gate, &up});
  Tensor out;
  {
    ForwardScope scope(rec);
    out = ops::swiglu(gate, up);
  }
  if (!rec) return out;
  auto n = make_node("swiglu", [](Node& node, Grads& g) {
    auto [dgate, dup] = ops::swiglu_backward(g[0], node.saved[0], node.saved[1]);
    return Grads{dgate, dup};
  });
  n->save(gate);
  n->save(up);
  record(n, {&gate, &up}, {&out});
  return out;
}

Tensor cast(const Tensor& x, DType dtype) {
  const DType from = x.dtype();
  return unary(
      "cast", x, [dtype](const Tensor& t) { return t.to(dtype); },
      [from](Node&, const Tensor& g) { return g.to(from); }, Keep::nothing);
}

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  const Shape in = a.shape();
  return unary(
      "sum", a, [&](const Tensor& x) { return ops::sum(x, dims, keepdim); },
      [in, dims, keepdim](Node&, const Tensor& g) { return expand_back(g, in, dims, keepdim); },
      Keep::nothing);
}

Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  const Shape in = a.shape();
  const double count = reduced_count(in, dims);
  return unary(
      "mean", a, [&](const Tensor& x) { return ops::mean(x, dims, keepdim); },
      [in, dims, keepdim, count](Node&, const Tensor& g) {
        return ops::scale(expand_back(g, in, dims, keepdim), 1.0 / count);
      },
      Keep::nothing);
}

Tensor max(const Tensor& a, int64_t dim, bool keepdim) {
  const bool rec = needs_record({&a});
  ops::MaxOut r;
  {
    ForwardScope scope(rec);
    r = ops::max(a, dim, keepdim);
  }
  if (!rec) return r.values;
  auto n = make_node("max", [in = a.shape(), dim, keepdim](Node& node, Grads& g) {
    return Grads{ops::max_backward(g[0], node.saved[0], in, dim, keepdim)};
  });
  n->save(r.indices);
  record(n, {&a}, {&r.values});
  return r.values;
}

}  // namespace fitgrad::autograd
