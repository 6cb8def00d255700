// A regular expression that must match the whole of a string, as Python's re.fullmatch reads
// the patterns users give PEFT's target_modules and transformers' optim_target_modules.
//
// Note [Patterns in linear time]
// std::regex backtracks: a nested quantifier such as "(.*)*Z" against a module path that does
// not end in Z takes exponential time inside one call, which neither returns nor polls a stop
// flag, so a run hung there and ignored SIGINT. RE2 (a Debian package) compiles a pattern to
// an automaton and matches in time linear in the string, whatever the pattern. Its syntax is
// Python's for what such patterns use (classes, alternation, groups, repetition, escapes);
// what an automaton cannot run (backreferences, lookaround) is refused when the pattern is
// read, with RE2's reason.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace re2 {
class RE2;
}

namespace fitgrad::io {

class FullMatch {
 public:
  FullMatch() = default;
  // Throws fitgrad::Error "<what>: '<pattern>' is not a regular expression fitgrad reads
  // (<RE2's reason>)".
  FullMatch(const std::string& pattern, const std::string& what);
  // Whether the pattern matches all of `text` (false for a default-constructed one).
  bool operator()(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::shared_ptr<const re2::RE2> re_;
  std::string pattern_;
};

}  // namespace fitgrad::io
