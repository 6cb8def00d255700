// A JSON file read whole (see json_file.h).
#include "io/json_file.h"

#include <fmt/format.h>

#include <fstream>

#include "tensor/error.h"

namespace fitgrad::io {

nlohmann::json read_json_file(const std::string& path, const std::string& where) {
  std::ifstream in(path);
  FG_CHECK(in.good(), "{} cannot open the file", where);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{} invalid JSON: {}", where, e.what()));
  }
}

}  // namespace fitgrad::io
