// folder_files, data_kind and folder_kind (folder_files.h).
#include "data/folder_files.h"

#include <fmt/format.h>

#include <algorithm>

#include "tensor/error.h"

namespace fitgrad::data {

namespace fs = std::filesystem;

// Note [One kind of data a folder]
// A run trains on records or on text, never on both: the records go through the chat template
// and their loss masks, the text is one stream cut into windows, and a .txt file among .jsonl
// files has no format to be read in (nor a .jsonl file among .txt files a meaning as raw text).
// So a --data folder holding both kinds is refused, naming files of each, rather than read as
// one kind with the other dropped unseen. The extension decides, in any case (.JSONL, .Json,
// .TXT), as a file manager shows them; files of other extensions (a README.md) are not data.

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

std::string data_extension(const std::string& name) {
  std::string ext = fs::path(name).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; });
  return ext;
}

DataKind data_kind(const std::string& name) {
  const std::string ext = data_extension(name);
  if (ext == ".jsonl" || ext == ".json") return DataKind::records;
  return ext == ".txt" ? DataKind::text : DataKind::none;
}

DataKind folder_kind(const fs::path& folder, const std::string& where) {
  const auto of = [&](DataKind kind) {
    return folder_files(
        folder, [&](const std::string& n) { return data_kind(n) == kind; }, where);
  };
  const std::vector<std::string> records = of(DataKind::records), text = of(DataKind::text);
  const auto some = [](const std::vector<std::string>& files) {
    const size_t shown = std::min<size_t>(3, files.size());
    return fmt::format(
        "{}{}", fmt::join(files.begin(), files.begin() + ptrdiff_t(shown), ", "),
        files.size() > shown ? fmt::format(" and {} more", files.size() - shown) : std::string());
  };
  if (!records.empty() && !text.empty())
    throw Error(fmt::format(
        "{} holds both record files (.jsonl/.json: {}) and text files (.txt: {}); a run trains "
        "on one kind of data: move the other kind out of the folder",
        where, some(records), some(text)));
  return !records.empty() ? DataKind::records : !text.empty() ? DataKind::text : DataKind::none;
}

std::vector<std::string> folder_files_of(const fs::path& folder, DataKind kind,
                                         const std::string& where) {
  if (folder_kind(folder, where) != kind) return {};
  return folder_files(
      folder, [&](const std::string& n) { return data_kind(n) == kind; }, where);
}

}  // namespace fitgrad::data
