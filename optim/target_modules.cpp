// The low-rank optimizers' target modules (see target_modules.h).
#include "optim/target_modules.h"

#include <algorithm>

#include "io/full_match.h"
#include "tensor/error.h"

namespace fitgrad::optim {
namespace {

// Note [Patterns in linear time] in io/full_match.h.
io::FullMatch expression(const std::string& entry) {
  return io::FullMatch(entry, "[optim] --optim_target_modules");
}

}  // namespace

std::vector<std::string> parse_target_modules(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  for (const std::string& entry : out) {
    FG_CHECK(!entry.empty(), "[optim] --optim_target_modules '{}' has an empty name", text);
    expression(entry);
  }
  return out;
}

bool is_target_module(const std::vector<std::string>& targets, const std::string& name,
                      const Tensor& p) {
  if (p.dim() != 2) return false;
  const size_t dot = name.rfind('.');
  const std::string module = dot == std::string::npos ? std::string() : name.substr(0, dot);
  for (const std::string& t : targets) {
    if (module.find(t) != std::string::npos) return true;  // also when equal
    if (expression(t)(module)) return true;
  }
  return false;
}

}  // namespace fitgrad::optim
