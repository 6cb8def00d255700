// Atomic checkpoint directories (Note [Atomic checkpoints] in checkpoint_dir.h).
#include "apps/train/checkpoint_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "tensor/error.h"

namespace fitgrad::apps {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kPrefix = "checkpoint-";

void sync_path(const fs::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY);
  if (fd < 0) throw Error(fmt::format("[checkpoint {}] cannot open to sync", p.string()));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw Error(fmt::format("[checkpoint {}] fsync failed", p.string()));
}

// The step of a directory named checkpoint-<digits>; -1 otherwise.
int64_t step_of(const std::string& name) {
  if (name.rfind(kPrefix, 0) != 0 || name.size() == kPrefix.size()) return -1;
  int64_t step = 0;
  for (char c : name.substr(kPrefix.size())) {
    if (c < '0' || c > '9') return -1;
    step = step * 10 + (c - '0');
  }
  return step;
}

}  // namespace

std::string commit_checkpoint(const std::string& output_dir, int64_t step,
                              const std::function<void(const std::string& dir)>& write) {
  fs::path root(output_dir);
  fs::path tmp = root / fmt::format("tmp-{}{}", kPrefix, step);
  fs::path final_dir = root / fmt::format("{}{}", kPrefix, step);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) throw Error(fmt::format("[checkpoint {}] cannot create: {}", tmp.string(), ec.message()));
  write(tmp.string());
  for (const auto& e : fs::directory_iterator(tmp))
    if (e.is_regular_file()) sync_path(e.path());
  sync_path(tmp);
  if (fs::exists(final_dir)) {
    // Replacing a checkpoint of the same step: move the old one aside first, so a crash
    // between the renames still leaves one complete copy on disk.
    fs::path old = root / fmt::format("old-{}{}", kPrefix, step);
    fs::remove_all(old, ec);
    fs::rename(final_dir, old);
    fs::rename(tmp, final_dir);
    fs::remove_all(old, ec);
  } else {
    fs::rename(tmp, final_dir, ec);
    if (ec)
      throw Error(fmt::format("[checkpoint {}] cannot rename into place: {}", final_dir.string(),
                              ec.message()));
  }
  sync_path(root);
  return final_dir.string();
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& output_dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(output_dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(output_dir)) {
    int64_t step = step_of(e.path().filename().string());
    if (step >= 0 && e.is_directory() && fs::exists(e.path() / "trainer_state.json"))
      out.emplace_back(step, e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void prune_checkpoints(const std::string& output_dir, int64_t keep) {
  if (keep <= 0) return;
  auto all = list_checkpoints(output_dir);
  for (size_t i = 0; i + size_t(keep) < all.size(); ++i) fs::remove_all(all[i].second);
}

std::string resolve_resume_dir(const std::string& arg, const std::string& output_dir) {
  if (arg == "last" || arg == "true" || arg == "True") {
    auto all = list_checkpoints(output_dir);
    if (all.empty())
      throw Error(fmt::format(
          "[train] --resume_from_checkpoint {}: no checkpoint-<step> directory in --output_dir {}",
          arg, output_dir));
    return all.back().second;
  }
  if (!fs::is_directory(arg))
    throw Error(fmt::format("[train] --resume_from_checkpoint {}: no such directory", arg));
  if (!fs::exists(fs::path(arg) / "trainer_state.json"))
    throw Error(fmt::format(
        "[train] --resume_from_checkpoint {}: not a fitgrad checkpoint (no trainer_state.json)",
        arg));
  return arg;
}

}  // namespace fitgrad::apps
