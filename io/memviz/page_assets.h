// The style sheet and the script inlined into every memviz page (page.h). They are C++
// string constants, not files read at run time, so the command has nothing to install
// beside the binary and the page nothing to fetch.
#pragma once

#include <string_view>

namespace fitgrad::io {

extern const std::string_view kPageStyle;
extern const std::string_view kPageScript;

}  // namespace fitgrad::io
