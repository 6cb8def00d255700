// The label intern table and the thread-local memory context.
#include "tensor/memory/scope.h"

#include <deque>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "tensor/error.h"

namespace fitgrad {

std::string_view category_name(Category c) {
  switch (c) {
    case Category::parameter: return "parameter";
    case Category::gradient: return "gradient";
    case Category::optimizer_state: return "optimizer_state";
    case Category::activation: return "activation";
    case Category::temporary: return "temporary";
    case Category::quantized_weight: return "quantized_weight";
    case Category::buffer: return "buffer";
    case Category::data: return "data";
    case Category::other: return "other";
    case Category::collective: return "collective";
  }
  return "?";
}

Category parse_category(std::string_view name) {
  for (int i = 0; i < kNumCategories; ++i)
    if (category_name(Category(i)) == name) return Category(i);
  throw Error(fmt::format("[memory] unknown category '{}'", name));
}

namespace {

// Labels live in a deque so references handed out by label_text stay valid.
struct LabelTable {
  std::shared_mutex mutex;
  std::deque<std::string> texts{std::string()};
  std::unordered_map<std::string_view, uint32_t> ids{{std::string_view(), 0}};
};

LabelTable& table() {
  static LabelTable* t = new LabelTable();  // never destroyed: used by late destructors
  return *t;
}

thread_local MemoryContext tls_context;

}  // namespace

uint32_t intern_label(std::string_view label) {
  LabelTable& t = table();
  {
    std::shared_lock lock(t.mutex);
    auto it = t.ids.find(label);
    if (it != t.ids.end()) return it->second;
  }
  std::unique_lock lock(t.mutex);
  auto it = t.ids.find(label);
  if (it != t.ids.end()) return it->second;
  const auto id = uint32_t(t.texts.size());
  t.texts.emplace_back(label);
  t.ids.emplace(t.texts.back(), id);
  return id;
}

const std::string& label_text(uint32_t id) {
  LabelTable& t = table();
  std::shared_lock lock(t.mutex);
  FG_ASSERT(id < t.texts.size(), "label id {} was never interned", id);
  return t.texts[id];
}

MemoryContext current_memory_context() { return tls_context; }

CategoryScope::CategoryScope(Category c) : saved_(tls_context.category) {
  tls_context.category = c;
}
CategoryScope::~CategoryScope() { tls_context.category = saved_; }

LabelScope::LabelScope(std::string_view part, char sep) : saved_(tls_context.label) {
  if (saved_ == 0) {
    tls_context.label = intern_label(part);
  } else {
    std::string joined = label_text(saved_);
    joined += sep;
    joined += part;
    tls_context.label = intern_label(joined);
  }
}
LabelScope::~LabelScope() { tls_context.label = saved_; }

MemoryContextScope::MemoryContextScope(MemoryContext ctx) : saved_(tls_context) {
  tls_context = ctx;
}
MemoryContextScope::~MemoryContextScope() { tls_context = saved_; }

}  // namespace fitgrad
