// read_whole_file (whole_file.h).
#include "io/whole_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tensor/error.h"

namespace fitgrad::io {

std::string read_whole_file(const char* command, const char* what, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  FG_CHECK(in.good() && std::filesystem::is_regular_file(path), "[{}] cannot open the {} '{}'",
           command, what, path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace fitgrad::io
