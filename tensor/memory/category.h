// Memory categories: what an allocation is for (DESIGN.md, Allocator and memory ledger).
#pragma once

#include <cstdint>
#include <string_view>

namespace fitgrad {

enum class Category : uint8_t {
  parameter,
  gradient,
  optimizer_state,
  activation,  // saved for backward
  temporary,   // workspaces and op temporaries
  quantized_weight,
  buffer,  // module state that is not trained (nn::Module::register_buffer)
  data,
  other,
  collective,  // buffers of a collective (dist/: DDP's gradient buckets, staging)
};
inline constexpr int kNumCategories = 10;

std::string_view category_name(Category c);
// Parses the names that category_name prints; throws fitgrad::Error otherwise.
Category parse_category(std::string_view name);

}  // namespace fitgrad
