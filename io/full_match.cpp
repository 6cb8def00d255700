// FullMatch over RE2 (see full_match.h).
#include "io/full_match.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include "tensor/error.h"

namespace fitgrad::io {

FullMatch::FullMatch(const std::string& pattern, const std::string& what) : pattern_(pattern) {
  RE2::Options options;
  options.set_log_errors(false);
  auto re = std::make_shared<const re2::RE2>(pattern, options);
  FG_CHECK(re->ok(),
           "{}: '{}' is not a regular expression fitgrad reads ({}; patterns run in "
           "linear time, without backreferences or lookaround)",
           what, pattern, re->error());
  re_ = std::move(re);
}

bool FullMatch::operator()(std::string_view text) const {
  return re_ && RE2::FullMatch(re2::StringPiece(text.data(), text.size()), *re_);
}

}  // namespace fitgrad::io
