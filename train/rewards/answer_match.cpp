// Answer extraction and comparison (answer_match.h).
#include "train/rewards/answer_match.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <cmath>

#include "tensor/error.h"

namespace fitgrad::train::rewards {
namespace {

std::string trim(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return "";
  return std::string(s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1));
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A number's canonical digits (Note [Comparing answers]): "-12.5" for "-$12.50", none when s
// is not a number.
std::optional<std::string> canonical_number(std::string_view s) {
  std::string t = trim(s);
  std::string_view v = t;
  bool negative = false;
  if (!v.empty() && (v[0] == '-' || v[0] == '+')) {
    negative = v[0] == '-';
    v.remove_prefix(1);
  }
  if (!v.empty() && v[0] == '$') v.remove_prefix(1);
  if (!v.empty() && (v.back() == '.' || v.back() == '%')) v.remove_suffix(1);
  const size_t dot = v.find('.');
  std::string_view whole = v.substr(0, dot);
  std::string_view fraction = dot == std::string_view::npos ? "" : v.substr(dot + 1);
  if (whole.empty() || (dot != std::string_view::npos && fraction.empty())) return std::nullopt;
  // Thousands commas: a first group of one to three digits, then groups of exactly three.
  std::string digits;
  size_t group = 0;
  bool first_group = true;
  for (char c : whole) {
    if (c == ',') {
      if (group == 0 || group > 3 || (!first_group && group != 3)) return std::nullopt;
      first_group = false;
      group = 0;
      continue;
    }
    if (!is_digit(c)) return std::nullopt;
    digits += c;
    ++group;
  }
  if (!first_group && group != 3) return std::nullopt;
  for (char c : fraction)
    if (!is_digit(c)) return std::nullopt;
  std::string frac(fraction);
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  const size_t nonzero = digits.find_first_not_of('0');
  digits = nonzero == std::string::npos ? "0" : digits.substr(nonzero);
  std::string out = frac.empty() ? digits : digits + "." + frac;
  if (negative && out != "0") out = "-" + out;
  return out;
}

}  // namespace

std::optional<std::string> boxed_answer(std::string_view text) {
  static constexpr std::string_view kBoxed = "\\boxed{";
  size_t at = text.rfind(kBoxed);
  while (at != std::string_view::npos) {
    int depth = 1;
    const size_t begin = at + kBoxed.size();
    for (size_t i = begin; i < text.size(); ++i) {
      if (text[i] == '{') ++depth;
      if (text[i] == '}' && --depth == 0) return trim(text.substr(begin, i - begin));
    }
    // Unbalanced (the completion was cut off inside it): an earlier one may be whole.
    at = at == 0 ? std::string_view::npos : text.rfind(kBoxed, at - 1);
  }
  return std::nullopt;
}

std::optional<std::string> marked_answer(std::string_view text) {
  const size_t at = text.rfind("####");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(at + 4);
  return trim(rest.substr(0, rest.find('\n')));
}

std::optional<std::string> last_number(std::string_view text) {
  // Scan backwards for the last digit, then extend over digits, commas followed by digits,
  // one dot followed by digits, and a sign.
  size_t end = text.size();
  while (end > 0 && !is_digit(text[end - 1])) --end;
  if (end == 0) return std::nullopt;
  size_t begin = end;
  while (begin > 0) {
    const char c = text[begin - 1];
    if (is_digit(c) || ((c == ',' || c == '.') && begin - 1 > 0 && is_digit(text[begin - 2])))
      --begin;
    else
      break;
  }
  if (begin > 0 && text[begin - 1] == '-') --begin;
  return std::string(text.substr(begin, end - begin));
}

bool answers_equal(std::string_view a, std::string_view b) {
  const auto na = canonical_number(a), nb = canonical_number(b);
  if (na && nb) return *na == *nb;
  return trim(a) == trim(b);
}

AnswerMatchReward::AnswerMatchReward(AnswerExtraction extraction, std::string column)
    : extraction_(extraction), column_(std::move(column)) {
  FG_CHECK(!column_.empty(), "[reward {}] the answer column's name is empty", name());
}

std::string AnswerMatchReward::name() const {
  return extraction_ == AnswerExtraction::marker ? "exact_match" : "last_number";
}

std::vector<double> AnswerMatchReward::score(std::span<const RewardSample> samples) {
  std::vector<double> out;
  out.reserve(samples.size());
  for (const RewardSample& s : samples) {
    const auto column = s.row.find(column_);
    if (column == s.row.end()) {
      std::vector<std::string> keys;
      for (const auto& [key, value] : s.row.items()) keys.push_back(key);
      throw Error(fmt::format(
          "[reward {}] the row has no column '{}' (its columns: {}); name the answer's column "
          "as {}:COLUMN in --reward_funcs",
          name(), column_, fmt::join(keys, ", "), name()));
    }
    std::string gold_text;
    if (column->is_string())
      gold_text = column->get<std::string>();
    else if (column->is_number())
      gold_text = column->dump();
    std::optional<std::string> gold = boxed_answer(gold_text);
    if (!gold) gold = marked_answer(gold_text);
    if (!gold) gold = trim(gold_text);
    if (gold->empty()) {
      out.push_back(std::nan(""));
      continue;
    }
    const std::optional<std::string> given =
        extraction_ == AnswerExtraction::last_number
            ? last_number(s.completion)
            : (boxed_answer(s.completion) ? boxed_answer(s.completion)
                                          : marked_answer(s.completion));
    out.push_back(given && answers_equal(*given, *gold) ? 1.0 : 0.0);
  }
  return out;
}

}  // namespace fitgrad::train::rewards
