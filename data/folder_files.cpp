// folder_files (folder_files.h).
#include "data/folder_files.h"

#include <fmt/format.h>

#include <algorithm>

#include "tensor/error.h"

namespace fitgrad::data {

namespace fs = std::filesystem;

std::vector<std::string> folder_files(const fs::path& folder,
                                      const std::function<bool(const std::string&)>& keep,
                                      const std::string& where) {
  std::vector<std::string> relative;
  try {
    for (auto it = fs::recursive_directory_iterator(folder);
         it != fs::recursive_directory_iterator(); ++it) {
      const std::string name = it->path().filename().string();
      if (name.starts_with('.')) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (keep(name) && it->is_regular_file())
        relative.push_back(it->path().lexically_relative(folder).generic_string());
    }
  } catch (const fs::filesystem_error& e) {
    throw Error(fmt::format("{} cannot list the folder: {}", where, e.what()));
  }
  std::sort(relative.begin(), relative.end());
  return relative;
}

}  // namespace fitgrad::data
