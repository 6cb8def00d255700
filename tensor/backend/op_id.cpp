// Names of the ops (see op_id.h).
#include "tensor/backend/op_id.h"

namespace fitgrad::backend {

const char* op_name(OpId op) {
  static constexpr std::array<const char*, kOpCount> names = {
#define FITGRAD_OP_NAME(name) #name,
      FITGRAD_OPS(FITGRAD_OP_NAME)
#undef FITGRAD_OP_NAME
  };
  return names[size_t(op)];
}

const std::array<OpId, kOpCount>& all_ops() {
  static const std::array<OpId, kOpCount> ops = [] {
    std::array<OpId, kOpCount> a{};
    for (size_t i = 0; i < kOpCount; ++i) a[i] = OpId(i);
    return a;
  }();
  return ops;
}

}  // namespace fitgrad::backend
