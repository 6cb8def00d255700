// View ops: sizes, strides and offsets of each op, aliasing with the base, contiguous()
// of strided views, view vs reshape, expand, zero-size tensors and the errors for bad
// shapes and dims. The base tensor holds its own flat indices, so each row's reference
// is a hand-written map from a view index to a flat index of the base.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "tensor/tensor.h"

namespace fitgrad {
namespace {

using ::testing::HasSubstr;
using Index = std::vector<int64_t>;

// Every index of `shape` in row-major order.
std::vector<Index> all_indices(const Shape& shape) {
  std::vector<Index> out;
  const int64_t n = numel(shape);
  for (int64_t flat = 0; flat < n; ++flat) {
    Index idx(shape.size());
    int64_t rest = flat;
    for (size_t d = shape.size(); d-- > 0;) {
      idx[d] = rest % shape[d];
      rest /= shape[d];
    }
    out.push_back(idx);
  }
  return out;
}

// The base: shape (2, 3, 4), element [i, j, k] = 12 i + 4 j + k.
Tensor make_base(DType dtype) { return Tensor::arange(24, dtype).view({2, 3, 4}); }

struct ViewCase {
  const char* name;
  std::function<Tensor(const Tensor&)> make;
  Shape shape;
  Strides strides;
  int64_t offset;
  bool contiguous;
  std::function<int64_t(const Index&)> ref;  // view index -> flat index in the base
};

const std::vector<ViewCase>& view_cases() {
  static const std::vector<ViewCase> cases = {
      {"slice_mid",
       [](const Tensor& t) { return t.slice(1, 1, 3); },
       {2, 2, 4},
       {12, 4, 1},
       4,
       false,
       [](const Index& i) { return 12 * i[0] + 4 * (i[1] + 1) + i[2]; }},
      {"slice_step",
       [](const Tensor& t) { return t.slice(2, 0, 4, 2); },
       {2, 3, 2},
       {12, 4, 2},
       0,
       false,
       [](const Index& i) { return 12 * i[0] + 4 * i[1] + 2 * i[2]; }},
      {"slice_step_uneven",
       [](const Tensor& t) { return t.slice(2, 1, 4, 2); },
       {2, 3, 2},
       {12, 4, 2},
       1,
       false,
       [](const Index& i) { return 12 * i[0] + 4 * i[1] + 1 + 2 * i[2]; }},
      {"slice_negative_clamped",
       [](const Tensor& t) { return t.slice(-1, -3, 100); },
       {2, 3, 3},
       {12, 4, 1},
       1,
       false,
       [](const Index& i) { return 12 * i[0] + 4 * i[1] + 1 + i[2]; }},
      {"slice_far_negative_start",
       [](const Tensor& t) { return t.slice(0, -100, 1); },
       {1, 3, 4},
       {12, 4, 1},
       0,
       true,
       [](const Index& i) { return 4 * i[1] + i[2]; }},
      {"slice_second_block",
       [](const Tensor& t) { return t.slice(0, 1, 2); },
       {1, 3, 4},
       {12, 4, 1},
       12,
       true,
       [](const Index& i) { return 12 + 4 * i[1] + i[2]; }},
      {"narrow",
       [](const Tensor& t) { return t.narrow(2, 1, 2); },
       {2, 3, 2},
       {12, 4, 1},
       1,
       false,
       [](const Index& i) { return 12 * i[0] + 4 * i[1] + 1 + i[2]; }},
      {"narrow_negative_start",
       [](const Tensor& t) { return t.narrow(1, -1, 1); },
       {2, 1, 4},
       {12, 4, 1},
       8,
       false,
       [](const Index& i) { return 12 * i[0] + 8 + i[2]; }},
      {"select_negative",
       [](const Tensor& t) { return t.select(1, -1); },
       {2, 4},
       {12, 1},
       8,
       false,
       [](const Index& i) { return 12 * i[0] + 8 + i[1]; }},
      {"select_to_0d",
       [](const Tensor& t) { return t.select(0, 1).select(0, 2).select(0, 3); },
       {},
       {},
       23,
       true,
       [](const Index&) { return int64_t(23); }},
      {"transpose",
       [](const Tensor& t) { return t.transpose(0, 2); },
       {4, 3, 2},
       {1, 4, 12},
       0,
       false,
       [](const Index& i) { return 12 * i[2] + 4 * i[1] + i[0]; }},
      {"permute",
       [](const Tensor& t) {
         return t.permute({1, 2, 0});
       },
       {3, 4, 2},
       {4, 1, 12},
       0,
       false,
       [](const Index& i) { return 12 * i[2] + 4 * i[0] + i[1]; }},
      {"permute_negative_dims",
       [](const Tensor& t) {
         return t.permute({-1, 0, 1});
       },
       {4, 2, 3},
       {1, 12, 4},
       0,
       false,
       [](const Index& i) { return 12 * i[1] + 4 * i[2] + i[0]; }},
      {"view",
       [](const Tensor& t) {
         return t.view({6, 4});
       },
       {6, 4},
       {4, 1},
       0,
       true,
       [](const Index& i) { return 4 * i[0] + i[1]; }},
      {"view_infer",
       [](const Tensor& t) {
         return t.view({4, -1});
       },
       {4, 6},
       {6, 1},
       0,
       true,
       [](const Index& i) { return 6 * i[0] + i[1]; }},
      {"view_of_slice_merges",
       [](const Tensor& t) { return t.slice(0, 1, 2).view({12}); },
       {12},
       {1},
       12,
       true,
       [](const Index& i) { return 12 + i[0]; }},
      {"view_splits_strided_dim",
       [](const Tensor& t) {
         return t.transpose(0, 2).view({2, 2, 3, 2});
       },
       {2, 2, 3, 2},
       {2, 1, 4, 12},
       0,
       false,
       [](const Index& i) { return 12 * i[3] + 4 * i[2] + 2 * i[0] + i[1]; }},
      {"view_keeps_sliced_rows",
       [](const Tensor& t) {
         return t.slice(2, 0, 2).view({2, 3, 1, 2});
       },
       {2, 3, 1, 2},
       {12, 4, 2, 1},
       0,
       false,
       [](const Index& i) { return 12 * i[0] + 4 * i[1] + i[3]; }},
      {"reshape_viewable",
       [](const Tensor& t) {
         return t.reshape({2, 12});
       },
       {2, 12},
       {12, 1},
       0,
       true,
       [](const Index& i) { return 12 * i[0] + i[1]; }},
      {"unsqueeze",
       [](const Tensor& t) { return t.unsqueeze(1); },
       {2, 1, 3, 4},
       {12, 12, 4, 1},
       0,
       true,
       [](const Index& i) { return 12 * i[0] + 4 * i[2] + i[3]; }},
      {"unsqueeze_last",
       [](const Tensor& t) { return t.unsqueeze(-1); },
       {2, 3, 4, 1},
       {12, 4, 1, 1},
       0,
       true,
       [](const Index& i) { return 12 * i[0] + 4 * i[1] + i[2]; }},
      {"squeeze",
       [](const Tensor& t) { return t.slice(1, 2, 3).squeeze(1); },
       {2, 4},
       {12, 1},
       8,
       false,
       [](const Index& i) { return 12 * i[0] + 8 + i[1]; }},
      {"expand_size1",
       [](const Tensor& t) {
         return t.slice(2, 0, 1).expand({2, 3, 5});
       },
       {2, 3, 5},
       {12, 4, 0},
       0,
       false,
       [](const Index& i) { return 12 * i[0] + 4 * i[1]; }},
      {"expand_leading",
       [](const Tensor& t) {
         return t.select(0, 1).select(0, 2).expand({3, -1});
       },
       {3, 4},
       {0, 1},
       20,
       false,
       [](const Index& i) { return 20 + i[1]; }},
      {"expand_transposed",
       [](const Tensor& t) {
         return t.select(2, 1).unsqueeze(0).expand({2, 2, 3}).transpose(0, 2);
       },
       {3, 2, 2},
       {4, 12, 0},
       1,
       false,
       [](const Index& i) { return 12 * i[1] + 4 * i[0] + 1; }},
  };
  return cases;
}

class ViewTable : public ::testing::TestWithParam<DType> {};

TEST_P(ViewTable, EveryOpAgainstItsReference) {
  for (const ViewCase& c : view_cases()) {
    SCOPED_TRACE(c.name);
    const Tensor base = make_base(GetParam());
    const Tensor v = c.make(base);
    EXPECT_EQ(v.shape(), c.shape);
    EXPECT_EQ(v.strides(), c.strides);
    EXPECT_EQ(v.offset(), c.offset);
    EXPECT_EQ(v.is_contiguous(), c.contiguous);
    EXPECT_TRUE(v.shares_storage_with(base));
    EXPECT_EQ(v.dtype(), GetParam());

    // contiguous(): the same tensor when already contiguous, otherwise a fresh copy
    // holding the reference values.
    const Tensor dense = v.contiguous();
    EXPECT_TRUE(dense.is_contiguous());
    EXPECT_EQ(dense.same(v), c.contiguous);
    EXPECT_EQ(dense.shares_storage_with(base), c.contiguous);
    std::vector<int64_t> want;
    for (const Index& i : all_indices(c.shape)) want.push_back(c.ref(i));
    EXPECT_EQ(dense.to_vector<int64_t>(), want);
    EXPECT_EQ(v.to_vector<int64_t>(), want);
    for (const Index& i : all_indices(c.shape)) EXPECT_EQ(v.at(i), double(c.ref(i)));

    // Aliasing: writes through the view land on the base elements the reference names,
    // and nowhere else.
    Tensor target = make_base(GetParam());
    Tensor w = c.make(target);
    std::vector<int64_t> expected(24);
    for (int64_t f = 0; f < 24; ++f) expected[size_t(f)] = f;
    for (const Index& i : all_indices(c.shape)) {
      w.set(i, double(c.ref(i) + 100));
      expected[size_t(c.ref(i))] = c.ref(i) + 100;
    }
    EXPECT_EQ(target.to_vector<int64_t>(), expected);
  }
}

// Offsets count elements: 4-, 2-, 8- and 1-byte elements check that they scale.
INSTANTIATE_TEST_SUITE_P(Dtypes, ViewTable,
                         ::testing::Values(DType::f32, DType::bf16, DType::i64, DType::u8,
                                           DType::i8),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

void expect_error(const std::function<void()>& f, std::vector<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected a fitgrad::Error containing " << parts[0];
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_THAT(e.what(), HasSubstr(p));
  }
}

TEST(ViewErrors, NameTheOpAndTheShapes) {
  const Tensor t = make_base(DType::f32);
  struct Row {
    const char* name;
    std::function<void()> f;
    std::vector<std::string> parts;
  };
  const Row rows[] = {
      {"slice_dim", [&] { t.slice(3, 0, 1); }, {"[slice]", "dim 3"}},
      {"slice_step", [&] { t.slice(0, 0, 2, 0); }, {"[slice]", "step", "(2, 3, 4)"}},
      {"narrow", [&] { t.narrow(1, 2, 2); }, {"[narrow]", "(2, 3, 4)"}},
      {"narrow_negative_length", [&] { t.narrow(1, 0, -1); }, {"[narrow]"}},
      {"select", [&] { t.select(2, 4); }, {"[select]", "index 4", "(2, 3, 4)"}},
      {"select_negative", [&] { t.select(0, -3); }, {"[select]", "index -3"}},
      {"transpose", [&] { t.transpose(0, -4); }, {"[transpose]", "dim -4"}},
      {"permute_dup",
       [&] {
         t.permute({0, 0, 1});
       },
       {"[permute]", "(0, 0, 1)", "(2, 3, 4)"}},
      {"permute_count",
       [&] {
         t.permute({0, 1});
       },
       {"[permute]"}},
      {"view_numel",
       [&] {
         t.view({5, 5});
       },
       {"[view]", "(5, 5)", "(2, 3, 4)"}},
      {"view_two_infer",
       [&] {
         t.view({-1, -1});
       },
       {"[view]", "more than one -1"}},
      {"view_infer_bad",
       [&] {
         t.view({-1, 5});
       },
       {"[view]", "(-1, 5)"}},
      {"view_negative",
       [&] {
         t.view({-2, -12});
       },
       {"[view]", "negative"}},
      {"view_strides",
       [&] {
         t.transpose(0, 1).view({6, 4});
       },
       {"[view]", "(3, 2, 4)", "(6, 4)", "reshape"}},
      {"reshape_numel", [&] { t.reshape({7}); }, {"[reshape]", "(7)"}},
      {"expand_non1",
       [&] {
         t.expand({2, 5, 4});
       },
       {"[expand]", "(2, 3, 4)", "(2, 5, 4)"}},
      {"expand_fewer",
       [&] {
         t.expand({3, 4});
       },
       {"[expand]", "(2, 3, 4)", "(3, 4)"}},
      {"expand_leading_infer",
       [&] {
         t.expand({-1, 2, 3, 4});
       },
       {"[expand]"}},
      {"unsqueeze", [&] { t.unsqueeze(4); }, {"[unsqueeze]", "dim 4"}},
      {"squeeze", [&] { t.squeeze(1); }, {"[squeeze]", "(2, 3, 4)"}},
      {"size", [&] { t.size(3); }, {"[size]"}},
      {"copy_expanded",
       [&] {
         Tensor(t.slice(2, 0, 1).expand({2, 3, 4})).copy_(t);
       },
       {"[copy_]", "expanded"}},
      {"copy_shape",
       [&] {
         Tensor(t).copy_(Tensor::zeros({3, 3}));
       },
       {"[copy_]", "(3, 3)", "(2, 3, 4)"}},
      {"item", [&] { t.item(); }, {"[item]", "(2, 3, 4)"}},
      {"at_rank",
       [&] {
         t.at({0, 0});
       },
       {"[at]", "(2, 3, 4)"}},
      {"at_range",
       [&] {
         t.at({0, 3, 0});
       },
       {"[at]", "index 3"}},
      {"set_range",
       [&] {
         Tensor(t).set({2, 0, 0}, 1.0);
       },
       {"[set]", "index 2"}},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    expect_error(r.f, r.parts);
  }
}

// Element offsets of t in row-major order, from its sizes and strides.
std::vector<int64_t> element_offsets(const Tensor& t) {
  std::vector<int64_t> out;
  for (const Index& i : all_indices(t.shape())) {
    int64_t off = t.offset();
    for (size_t d = 0; d < i.size(); ++d) off += i[d] * t.strides()[d];
    out.push_back(off);
  }
  return out;
}

// All shapes of 1 to 4 dims (sizes 1..n) with n elements.
void shapes_of(int64_t n, Shape prefix, std::vector<Shape>& out) {
  if (!prefix.empty() && numel(prefix) == n) out.push_back(prefix);
  if (prefix.size() == 4) return;
  const int64_t have = numel(prefix);
  for (int64_t s = 1; s <= n; ++s) {
    if (n % (have * s) != 0) continue;
    Shape next = prefix;
    next.push_back(s);
    shapes_of(n, next, out);
  }
}

// Completeness and soundness of view(): the only strides a view of shape S could have
// are the offset steps between neighbours along each dim (for dims of size > 1); a view
// exists exactly when those steps reproduce every element offset.
TEST(ViewTest, ViewExistsExactlyWhenSomeStridesWork) {
  const Tensor base = make_base(DType::f32);
  const std::vector<std::pair<const char*, Tensor>> sources = {
      {"base", base},
      {"permute_120", base.permute({1, 2, 0})},
      {"permute_021", base.permute({0, 2, 1})},
      {"permute_102", base.permute({1, 0, 2})},
      {"permute_210", base.permute({2, 1, 0})},
      {"slice_step", base.slice(2, 0, 4, 2)},
      {"slice_rows", base.slice(1, 1, 3)},
      {"slice_cols", base.slice(2, 1, 3)},
      {"unsqueezed_transpose", base.unsqueeze(1).transpose(0, 3)},
      {"expanded", base.slice(2, 0, 1).expand({2, 3, 2})},
  };
  int viewable = 0;
  int not_viewable = 0;
  for (const auto& [name, t] : sources) {
    std::vector<Shape> shapes;
    shapes_of(t.numel(), {}, shapes);
    const std::vector<int64_t> offsets = element_offsets(t);
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(fmt::format("{} {} -> {}", name, shape_str(t.shape()), shape_str(shape)));
      const Strides unit = contiguous_strides(shape);  // row-major position steps
      Strides want(shape.size(), 0);
      for (size_t d = 0; d < shape.size(); ++d)
        if (shape[d] > 1) want[d] = offsets[size_t(unit[d])] - offsets[0];
      bool exists = true;
      const std::vector<Index> indices = all_indices(shape);
      for (size_t p = 0; p < indices.size(); ++p) {
        int64_t off = offsets[0];
        for (size_t d = 0; d < shape.size(); ++d) off += indices[p][d] * want[d];
        exists = exists && off == offsets[p];
      }
      bool threw = false;
      try {
        const Tensor v = t.view(shape);
        EXPECT_EQ(v.offset(), offsets[0]);
        for (size_t d = 0; d < shape.size(); ++d) {
          if (shape[d] > 1) {
            EXPECT_EQ(v.strides()[d], want[d]) << "dim " << d;
          }
        }
        EXPECT_EQ(element_offsets(v), offsets);
      } catch (const Error& e) {
        threw = true;
        EXPECT_THAT(e.what(), HasSubstr("[view]"));
      }
      EXPECT_EQ(!threw, exists);
      (exists ? viewable : not_viewable)++;
    }
  }
  // The table covers both outcomes in numbers.
  EXPECT_GT(viewable, 100);
  EXPECT_GT(not_viewable, 100);
}

TEST(ViewTest, ReshapeCopiesWhenNoViewExists) {
  const Tensor base = make_base(DType::f32);
  const Tensor t = base.transpose(0, 1);  // (3, 2, 4), strides (4, 12, 1)
  const Tensor r = t.reshape({6, 4});
  EXPECT_EQ(r.shape(), (Shape{6, 4}));
  EXPECT_FALSE(r.shares_storage_with(base));
  std::vector<int64_t> want;
  for (int64_t j = 0; j < 3; ++j)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t k = 0; k < 4; ++k) want.push_back(12 * i + 4 * j + k);
  EXPECT_EQ(r.to_vector<int64_t>(), want);
  EXPECT_EQ(t.flatten().to_vector<int64_t>(), want);
  // The viewable case shares.
  EXPECT_TRUE(t.reshape({3, 2, 2, 2}).shares_storage_with(base));
}

TEST(ViewTest, ExpandHasStrideZeroAndContiguousMaterializes) {
  const Tensor row = Tensor::from_vector<float>({1, 2, 3}, {3});
  const Tensor e = row.expand({4, 3});
  EXPECT_EQ(e.strides(), (Strides{0, 1}));
  EXPECT_FALSE(e.is_contiguous());
  const Tensor c = e.contiguous();
  EXPECT_EQ(c.strides(), (Strides{3, 1}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3}));
  // Writing to the base shows through every expanded row.
  Tensor(row).set({1}, 7);
  EXPECT_EQ(e.at({3, 1}), 7);
  EXPECT_EQ(c.at({3, 1}), 2);
}

TEST(ViewTest, ZeroSizeTensors) {
  const Tensor z = Tensor::zeros({0, 3});
  EXPECT_EQ(z.numel(), 0);
  EXPECT_EQ(z.nbytes(), 0u);
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_TRUE(z.to_vector<float>().empty());
  EXPECT_EQ(z.view({3, 0}).shape(), (Shape{3, 0}));
  EXPECT_EQ(z.view({-1, 3}).shape(), (Shape{0, 3}));
  EXPECT_EQ(z.reshape({0}).shape(), (Shape{0}));
  EXPECT_EQ(z.transpose(0, 1).contiguous().shape(), (Shape{3, 0}));
  EXPECT_EQ(z.clone().numel(), 0);
  EXPECT_EQ(z.to(DType::i8).dtype(), DType::i8);
  EXPECT_EQ(z.unsqueeze(0).expand({5, 0, 3}).shape(), (Shape{5, 0, 3}));
  EXPECT_EQ(z.slice(0, 0, 10).shape(), (Shape{0, 3}));
  EXPECT_THAT(z.str(), HasSubstr("tensor([], shape=(0, 3)"));
  // Slicing a non-empty tensor to nothing.
  const Tensor base = make_base(DType::f32);
  const Tensor s = base.slice(1, 2, 1);
  EXPECT_EQ(s.shape(), (Shape{2, 0, 4}));
  EXPECT_TRUE(s.contiguous().to_vector<float>().empty());
  Tensor(s).fill_(5);
  Tensor(s).copy_(Tensor::zeros({4}));
  EXPECT_EQ(base.to_vector<int64_t>()[0], 0);
  expect_error([&] { z.view({-1, 0}); }, {"[view]", "(-1, 0)"});
}

TEST(ViewTest, CopyAndFillThroughViews) {
  Tensor base = make_base(DType::f32);
  // Overlapping copy within one storage: rows 1..2 of dim 1 take the old rows 0..1.
  base.slice(1, 1, 3).copy_(base.slice(1, 0, 2));
  std::vector<int64_t> want;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) want.push_back(12 * i + 4 * (j == 0 ? 0 : j - 1) + k);
  EXPECT_EQ(base.to_vector<int64_t>(), want);

  // A broadcasting copy with a dtype conversion into a transposed view.
  Tensor dst = Tensor::zeros({3, 2}, DType::bf16);
  dst.transpose(0, 1).copy_(Tensor::from_vector<int32_t>({5, 6, 7}, {3}));
  EXPECT_EQ(dst.to_vector<int64_t>(), (std::vector<int64_t>{5, 5, 6, 6, 7, 7}));

  // fill_ of a strided view touches only its elements.
  Tensor f = Tensor::zeros({3, 4}, DType::i32);
  f.slice(1, 1, 4, 2).fill_(9);
  EXPECT_EQ(f.to_vector<int32_t>(), (std::vector<int32_t>{0, 9, 0, 9, 0, 9, 0, 9, 0, 9, 0, 9}));
}

}  // namespace
}  // namespace fitgrad
