// A JSON file read whole (see json_file.h).
#include "io/json_file.h"

#include <fmt/format.h>

#include <fstream>

#include "io/json_depth.h"
#include "tensor/error.h"

namespace fitgrad::io {

nlohmann::json read_json_file(const std::string& path, const std::string& where) {
  std::ifstream in(path, std::ios::binary);
  FG_CHECK(in.good(), "{} cannot open the file", where);
  const std::string text(std::istreambuf_iterator<char>(in), {});
  try {
    return parse_json<nlohmann::json>(text, where);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{} invalid JSON: {}", where, e.what()));
  }
}

}  // namespace fitgrad::io
