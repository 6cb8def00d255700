// Scope guards that tag allocations with a category and a label, so kernels never pass
// names around (DESIGN.md). The state is thread-local: a loader worker sets its own.
//
//   LabelScope layer("layers.3");            // label "layers.3"
//   LabelScope attn("attn");                 // label "layers.3.attn"
//   OpScope op("softmax");                   // label "layers.3.attn/softmax"
//   CategoryScope cat(Category::activation); // category for everything allocated inside
//
// Labels are interned once, when a scope is entered, into a process-wide table; an
// allocation only copies the 32-bit id. Id 0 is the empty label.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tensor/memory/category.h"

namespace fitgrad {

uint32_t intern_label(std::string_view label);
// The text of an interned label. The reference stays valid for the process lifetime.
const std::string& label_text(uint32_t id);

struct MemoryContext {
  Category category = Category::other;
  uint32_t label = 0;
};
MemoryContext current_memory_context();

class CategoryScope {
 public:
  explicit CategoryScope(Category c);
  ~CategoryScope();
  CategoryScope(const CategoryScope&) = delete;
  CategoryScope& operator=(const CategoryScope&) = delete;

 private:
  Category saved_;
};

class LabelScope {
 public:
  // Appends `part` to the current label, joined by `sep` unless the label is empty.
  explicit LabelScope(std::string_view part, char sep = '.');
  ~LabelScope();
  LabelScope(const LabelScope&) = delete;
  LabelScope& operator=(const LabelScope&) = delete;

 private:
  uint32_t saved_;
};

// Sets both category and label outright (not composed), restoring them on exit. The
// autograd tape uses it to run each backward rule under the label its forward op had.
class MemoryContextScope {
 public:
  explicit MemoryContextScope(MemoryContext ctx);
  ~MemoryContextScope();
  MemoryContextScope(const MemoryContextScope&) = delete;
  MemoryContextScope& operator=(const MemoryContextScope&) = delete;

 private:
  MemoryContext saved_;
};

// An op inside a module: "layers.3.mlp" + OpScope("silu") -> "layers.3.mlp/silu".
class OpScope : public LabelScope {
 public:
  explicit OpScope(std::string_view op) : LabelScope(op, '/') {}
};

}  // namespace fitgrad
