// A file read whole into a string, with the one error every command gives for a file it
// cannot open: "[command] cannot open the <what> '<path>'".
#pragma once

#include <string>

namespace fitgrad::io {

// The bytes of the regular file at `path`.
std::string read_whole_file(const char* command, const char* what, const std::string& path);

}  // namespace fitgrad::io
