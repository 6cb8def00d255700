// read_whole_file (whole_file.h).
#include "io/whole_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tensor/error.h"
#include "tensor/interrupt.h"

namespace fitgrad::io {

std::string read_whole_file(const char* command, const char* what, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  // Opening a FIFO blocks until a writer comes; a signal then ends the wait (the handlers do
  // not restart calls), and the command stops on it rather than calling the file unopenable.
  if (!in.good()) interruption_point();  // Note [Interruption points]
  FG_CHECK(in.good() && std::filesystem::is_regular_file(path), "[{}] cannot open the {} '{}'",
           command, what, path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace fitgrad::io
