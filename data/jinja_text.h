// Python's string behaviour for the Jinja engine (data/chat_template.h): strings are UTF-8
// bytes here and code points in Python, so lengths, indexes and slices count code points;
// white space is str.isspace()'s; strip, split, splitlines, case changes, repr() of a str and
// of a float, and HTML escaping (markupsafe's) follow Python. See Note [Python text rules]
// in jinja_text.cpp for where they are approximate.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fitgrad::data::jinja {

// Python's str.isspace() for one code point.
bool py_isspace(char32_t cp);
// The byte offset where each code point of s starts, and s.size() last.
std::vector<size_t> code_point_offsets(std::string_view s);
size_t code_point_count(std::string_view s);
bool is_ascii(std::string_view s);

// str.strip / lstrip / rstrip: white space, or any code point of `chars` when given.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split / rsplit (sep nullptr: runs of white space, empty parts dropped); maxsplit < 0
// is no limit.
std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);
// str.replace with count < 0 for all.
std::string py_replace(std::string_view s, std::string_view old, std::string_view with,
                       int64_t count);

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);
std::string py_title(std::string_view s);
std::string py_swapcase(std::string_view s);
// Whether s has a cased character and all cased characters are upper (lower) case.
bool py_isupper(std::string_view s);
bool py_islower(std::string_view s);

// repr() of a str, quotes included, and of a float ("1.0", "1e-05", "inf").
void append_string_repr(std::string_view s, std::string& out);
std::string float_repr(double d);
// markupsafe.escape: & < > " ' as entities.
std::string html_escape(std::string_view s);

}  // namespace fitgrad::data::jinja
