// plan_training: `fitgrad train` on meta for a target (plan.h).
#include "apps/memplan/plan.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "optim/offload.h"
#include "tensor/backend/profile.h"
#include "tensor/memory/bytes.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/scope.h"
#include "train/trainer.h"

namespace fitgrad::apps {

using train::kExitOutOfMemory;
using train::run_train;
using train::TrainArgs;
using train::validate;
namespace fs = std::filesystem;

namespace {

// The planned run's private output directory (Note [Where a plan writes]), removed when the
// plan ends.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            fmt::format("fitgrad-memplan-{}-{}", ::getpid(), counter.fetch_add(1));
    fs::remove_all(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

}  // namespace

std::string module_of(const std::string& label) {
  std::vector<std::string> parts;
  std::stringstream in(label.substr(0, label.find('/')));
  for (std::string part; std::getline(in, part, '.');) parts.push_back(part);
  if (parts.empty()) return label;
  // Within a block, up to its index and one more ("model.layers.3.mlp"); elsewhere the
  // owner of the tensor, without the tensor's own name ("model.embed_tokens").
  size_t keep = parts.size() - 1;
  for (size_t i = 0; i < parts.size(); ++i)
    if (!parts[i].empty() && std::isdigit(static_cast<unsigned char>(parts[i][0]))) {
      keep = std::min(i + 2, parts.size());
      break;
    }
  std::string out = parts[0];
  for (size_t j = 1; j < keep; ++j) out += "." + parts[j];
  return out;
}

PlanRecord::PlanRecord(OutputPolicy& o, const std::string& flag, const std::string& d)
    : outputs(o), dir(d) {
  o.directory(flag, d);
  for (const char* name :
       {"memory.json", "memory_trace.json", "memory.html", "peak_report.txt", "memory_summary.txt"})
    files.emplace_back(name, o.output(flag, (fs::path(d) / name).string()));
}

Plan plan_training(TrainArgs a, const PlanTarget& target, const std::string& record_dir) {
  if (record_dir.empty()) return plan_training(std::move(a), target, nullptr);
  OutputPolicy outputs("memplan", /*overwrite=*/true);
  PlanRecord record(outputs, "--output_dir", record_dir);
  Plan p = plan_training(std::move(a), target, &record);
  std::ostringstream no_stdout;
  outputs.commit(no_stdout);
  return p;
}

TrainArgs steps_to_plan(const TrainArgs& a) {
  if (a.max_steps <= kPlannedSteps) return a;
  const auto moved = [&](int64_t interval) {
    return interval < a.max_steps ? std::min<int64_t>(interval, 3) : interval;
  };
  TrainArgs p = a;
  p.max_steps = kPlannedSteps;
  p.logging_steps = moved(a.logging_steps);
  if (a.eval_strategy == "steps")
    p.eval_steps = moved(a.eval_steps > 0 ? a.eval_steps : a.logging_steps);
  if (a.torch_empty_cache_steps > 0) p.torch_empty_cache_steps = moved(a.torch_empty_cache_steps);
  // The learning-rate schedule changes no allocation; its warmup must still fit the run.
  p.warmup_steps = std::min(a.warmup_steps, kPlannedSteps);
  return p;
}

Plan plan_training(TrainArgs a, const PlanTarget& target, PlanRecord* record, bool every_step) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t run_steps = a.max_steps;
  const ScratchDir scratch;  // Note [Where a plan writes]
  // Note [One validation]: the checks that depend on the device read the target's.
  a.planned_device = target.profile.backend == DeviceType::cuda ? "cuda" : "cpu";
  a.device = "meta";
  a.data.clear();
  a.output_dir = scratch.path().string();
  a.progress = "plain";
  a.planned_capacity = target.capacity;
  a.planned_profile = target.profile;
  a.write_memory_record = record != nullptr;
  if (!every_step && a.max_steps > kPlannedSteps) {
    validate(a);  // the run's own flags, before they are moved (Note [Steps a plan extrapolates])
    a = steps_to_plan(a);
  }

  CachingAllocator& alloc = allocator_for(Device::meta());
  CachingAllocator& host = allocator_for(optim::offload_host(Device::meta()));
  host.reset_peak_stats();
  const int64_t allocated_before = alloc.stats().allocated_bytes[kAllPools].allocated;
  std::ostringstream out, err;
  const int code = run_train(a, out, err);

  Plan p;
  p.run_output = out.str();
  p.planned_steps = a.max_steps;
  p.run_steps = run_steps;
  const MemoryStats st = alloc.stats();
  // Every plan starts from an empty allocator (Note [A failed step leaves nothing behind]).
  if (st.allocated_bytes[kAllPools].current != 0) {
    std::string live;
    for (const SegmentInfo& seg : alloc.snapshot().segments)
      for (const BlockInfo& b : seg.blocks)
        if (b.allocated && live.size() < 400)
          live += fmt::format(" {} ({}, {})", label_text(b.label), category_name(b.category),
                              format_bytes(int64_t(b.size)));
    throw Error(fmt::format("[memplan] the planned run left {} allocated on meta:{}",
                            format_bytes(st.allocated_bytes[kAllPools].current), live));
  }
  p.fits = code == 0;
  if (code != 0) {
    FG_CHECK(code == kExitOutOfMemory, "[memplan] the planned run ended with code {}: {}", code,
             err.str());
    p.oom_report = err.str();
  }
  p.peak_allocated = st.allocated_bytes[kAllPools].peak;
  p.host_peak_allocated = host.stats().allocated_bytes[kAllPools].peak;
  p.peak_reserved = st.reserved_bytes[kAllPools].peak;
  p.total_allocated = st.allocated_bytes[kAllPools].allocated - allocated_before;
  const PeakState peak = alloc.peak();
  p.reserved_at_peak = peak.reserved;
  p.peak_mark =
      peak.last_mark == 0 ? std::string("(before the first mark)") : label_text(peak.last_mark);
  p.peak_by_category = peak.by_category;
  std::map<std::string, int64_t> modules;
  for (const auto& [label, bytes] : peak.by_label) modules[module_of(label_text(label))] += bytes;
  p.peak_by_module.assign(modules.begin(), modules.end());
  std::stable_sort(p.peak_by_module.begin(), p.peak_by_module.end(),
                   [](const auto& x, const auto& y) { return x.second > y.second; });
  if (record)
    for (const auto& [name, output] : record->files) {
      std::ifstream in(scratch.path() / name, std::ios::binary);
      FG_CHECK(in.good(), "[memplan] the planned run wrote no {}", name);
      io::AtomicFile& file = record->outputs.file(output);
      std::vector<char> chunk(size_t(1) << 20);
      while (in) {
        in.read(chunk.data(), std::streamsize(chunk.size()));
        if (in.gcount() > 0) file.write(chunk.data(), size_t(in.gcount()));
      }
    }
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

}  // namespace fitgrad::apps
