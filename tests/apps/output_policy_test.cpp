// Run safety II (issue 31): no command destroys a user's file. The probe's hostile cases
// stay here as tables: each output that must be refused (over an input in any spelling, a
// FIFO, /dev/stdout, a write-protected or hard-linked file, a run's directory or a
// checkpoint, an existing file without --overwrite) is refused with an error naming the
// flag and the path, and every file that was there is unchanged afterwards (contents,
// inode, a link still a link); the allowed cases keep a symlink a link, replace a file only
// with --overwrite, and leave no temporary file. Adapters export cannot merge faithfully
// and a negative --max_new_tokens are refused by name. Note [Output policy] in
// apps/output_policy.h states the rules.
#include "apps/output_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/export.h"
#include "apps/generate.h"
#include "apps/memplan/memplan_command.h"
#include "apps/memviz/command.h"
#include "apps/quantize.h"
#include "io/safetensors.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "nn/lora_adapter.h"
#include "nn/target_modules.h"
#include "tensor/error.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/export.h"
#include "tensor/memory/raw_source.h"
#include "tensor/memory/scope.h"
#include "tests/train/train_fixture.h"

namespace fitgrad::apps {

using train::TrainArgs;
namespace {
namespace fs = std::filesystem;
using ::testing::HasSubstr;

// What a path is, to compare before and after a refused command.
struct FileState {
  bool exists = false;
  bool link = false;
  std::string link_target;
  ino_t ino = 0;
  mode_t mode = 0;
  nlink_t nlink = 0;
  std::string bytes;  // a regular file's contents
  bool operator==(const FileState&) const = default;
};

FileState state_of(const fs::path& p) {
  FileState s;
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return s;
  s.exists = true;
  s.link = S_ISLNK(st.st_mode);
  if (s.link) s.link_target = fs::read_symlink(p).string();
  s.ino = st.st_ino;
  s.mode = st.st_mode;
  s.nlink = st.st_nlink;
  if (S_ISREG(st.st_mode)) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream b;
    b << in.rdbuf();
    s.bytes = b.str();
  }
  return s;
}

std::string read(const fs::path& p) { return state_of(fs::canonical(p)).bytes; }

// The names in `dir` that look like an atomic write's leftover temporary file.
std::vector<std::string> temporaries_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos)
      out.push_back(e.path().string());
  return out;
}

class OutputSafety : public test_train::TrainFixture {
 protected:
  void SetUp() override {
    TrainFixture::SetUp();
    trace_ = root_ / "t.json";
    CachingAllocator a(Device::meta(), make_virtual_source());
    std::vector<Allocation> live;
    for (int i = 0; i < 4; ++i) {
      const CategoryScope category(i % 2 ? Category::activation : Category::parameter);
      live.push_back(a.allocate(size_t(1 + i) << 20));
    }
    a.mark("step 1 / forward");
    write_chrome_trace(a, trace_.string());
  }
  fs::path p(const std::string& name) const { return root_ / name; }
  std::string make(const std::string& name, const std::string& bytes = "keep me\n") {
    fs::create_directories(p(name).parent_path());
    std::ofstream(p(name), std::ios::binary) << bytes;
    return p(name).string();
  }
  // Runs `command`, which must throw a fitgrad::Error holding every one of `parts`, and
  // checks that none of `watched` changed.
  void expect_refused(const std::string& what, const std::function<void()>& command,
                      const std::vector<std::string>& parts, const std::vector<fs::path>& watched) {
    std::vector<FileState> before;
    for (const fs::path& w : watched) before.push_back(state_of(w));
    std::string error;
    try {
      command();
    } catch (const Error& e) {
      error = e.what();
    }
    EXPECT_FALSE(error.empty()) << what << ": was not refused";
    for (const std::string& part : parts) EXPECT_THAT(error, HasSubstr(part)) << what;
    EXPECT_THAT(error, ::testing::Not(HasSubstr(".tmp."))) << what << ": names a temporary file";
    for (size_t i = 0; i < watched.size(); ++i)
      EXPECT_TRUE(state_of(watched[i]) == before[i]) << what << ": " << watched[i] << " changed";
    EXPECT_EQ(temporaries_in(root_), std::vector<std::string>{}) << what;
  }
  std::string memviz(const MemvizArgs& a) {
    std::ostringstream out;
    run_memviz(a, out);
    return out.str();
  }

  fs::path trace_;
};

// The probe's memviz cases: every output that would destroy a file is refused, and nothing
// changes.
TEST_F(OutputSafety, HostileMemvizOutputsAreRefusedAndChangeNothing) {
  const std::string t = trace_.string();
  fs::create_directories(p("sub"));
  fs::create_symlink("t.json", p("link-to-trace.json"));
  fs::create_hard_link(trace_, p("hard-trace.json"));
  ASSERT_EQ(::mkfifo(p("fifo").c_str(), 0644), 0);
  make("old.html");
  make("ro.html");
  fs::permissions(p("ro.html"),
                  fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);  // 0444
  make("twin-a.html");
  fs::create_hard_link(p("twin-a.html"), p("twin-b.html"));
  fs::create_symlink("/dev/null", p("to-null.html"));
  make("run/metrics.jsonl", "{\"step\": 1}\n");
  make("run/memory.html", "the run's page\n");
  make("run/checkpoint-4/fitgrad_checkpoint.json", "{}\n");
  make("hf/checkpoint-2/trainer_state.json", "{}\n");
  const std::vector<fs::path> watched = {trace_,
                                         p("link-to-trace.json"),
                                         p("hard-trace.json"),
                                         p("fifo"),
                                         p("old.html"),
                                         p("ro.html"),
                                         p("twin-a.html"),
                                         p("twin-b.html"),
                                         p("to-null.html"),
                                         p("run/memory.html"),
                                         "/dev/stdout",
                                         "/dev/null"};
  struct Case {
    std::string what;
    MemvizArgs args;
    std::vector<std::string> error;
  };
  auto args = [&](std::string html, std::string svg = "", bool overwrite = false) {
    MemvizArgs a{t, std::move(html), std::move(svg)};
    a.overwrite = overwrite;
    return a;
  };
  const std::vector<Case> cases = {
      {"-o the input", args(t, "", true), {"-o " + t, "is the input TRACE"}},
      {"-o ./t.json", args((root_ / "." / "t.json").string(), "", true), {"is the input TRACE"}},
      {"-o sub/../t.json",
       args((root_ / "sub/../t.json").string(), "", true),
       {"is the input TRACE"}},
      {"-o a symlink to the input",
       args(p("link-to-trace.json").string(), "", true),
       {"link-to-trace.json is the input TRACE"}},
      {"-o a hard link of the input",
       args(p("hard-trace.json").string(), "", true),
       {"is the input TRACE"}},
      {"--svg the input", args(p("new.html").string(), t, true), {"--svg", "is the input TRACE"}},
      {"--svg equal to -o",
       args(p("new.html").string(), p("new.html").string()),
       {"--svg", "is the same file as -o"}},
      {"-o a FIFO", args(p("fifo").string(), "", true), {"is a FIFO, not a regular file"}},
      {"-o /dev/stdout", args("/dev/stdout", "", true), {"-o /dev/stdout", "special file"}},
      {"-o a link to /dev/null",
       args(p("to-null.html").string(), "", true),
       {"leads to /dev/null", "special file"}},
      {"-o a directory", args(p("sub").string(), "", true), {"is a directory"}},
      {"-o an existing file",
       args(p("old.html").string()),
       {"old.html exists; pass --overwrite to replace it"}},
      {"-o a 0444 file",
       args(p("ro.html").string(), "", true),
       {"is write-protected", "not even with --overwrite"}},
      {"-o a hard-linked file", args(p("twin-a.html").string(), "", true), {"has 2 hard links"}},
      {"-o in a run's directory",
       args(p("run/memory.html").string(), "", true),
       {"a training run's directory", "metrics.jsonl"}},
      {"-o a new file in a run's directory",
       args(p("run/page.html").string()),
       {"a training run's directory"}},
      {"-o in a checkpoint",
       args(p("run/checkpoint-4/page.html").string()),
       {"a training run's directory or a checkpoint", "fitgrad_checkpoint.json"}},
      {"-o in a Trainer checkpoint",
       args(p("hf/checkpoint-2/page.html").string()),
       {"trainer_state.json"}},
      {"-o in a missing directory", args(p("no/such/page.html").string()), {"does not exist"}},
      {"--svg refused after a good -o",
       args(p("new.html").string(), p("fifo").string()),
       {"--svg", "is a FIFO"}},
      {"both to standard output", args("-", "-"), {"goes to standard output already"}},
  };
  for (const Case& c : cases) {
    expect_refused(
        c.what, [&] { memviz(c.args); }, c.error, watched);
    EXPECT_FALSE(fs::exists(p("new.html"))) << c.what << ": left a partial output";
  }
}

// A failure after the checks (a trace that cannot be read) leaves no output at all, not the
// page without its SVG.
TEST_F(OutputSafety, AFailedMemvizLeavesNoOutput) {
  make("bad.json", "{\"traceEvents\": 7}");
  expect_refused("a malformed trace",
                 [&] {
                   memviz({p("bad.json").string(), p("page.html").string(), p("pic.svg").string()});
                 },
                 {"[memviz]"}, {});
  EXPECT_FALSE(fs::exists(p("page.html")));
  EXPECT_FALSE(fs::exists(p("pic.svg")));
}

// The allowed cases: a new file, a symlinked output (the link stays, its target is
// replaced), --overwrite on a plain file, and "-" for standard output.
TEST_F(OutputSafety, MemvizWritesThroughLinksAndReplacesOnlyWithOverwrite) {
  const std::string t = trace_.string();
  EXPECT_THAT(memviz({t, p("new.html").string(), p("new.svg").string()}),
              HasSubstr("wrote " + p("new.html").string() + " and " + p("new.svg").string()));
  EXPECT_THAT(read(p("new.html")), HasSubstr("<!DOCTYPE html>"));
  EXPECT_EQ(read(p("new.svg")).rfind("<svg", 0), 0u);

  fs::create_directories(p("real"));
  make("real/page.html", "old page\n");
  fs::create_symlink("real/page.html", p("page.html"));
  const ino_t link_ino = state_of(p("page.html")).ino;
  MemvizArgs a{t, p("page.html").string(), ""};
  a.overwrite = true;
  memviz(a);
  const FileState link = state_of(p("page.html"));
  EXPECT_TRUE(link.link) << "the symlink became a regular file";
  EXPECT_EQ(link.link_target, "real/page.html");
  EXPECT_EQ(link.ino, link_ino);
  EXPECT_THAT(read(p("real/page.html")), HasSubstr("<!DOCTYPE html>"));

  make("plain.html", "old\n");
  const ino_t old_ino = state_of(p("plain.html")).ino;
  a.html = p("plain.html").string();
  memviz(a);
  EXPECT_THAT(read(p("plain.html")), HasSubstr("<!DOCTYPE html>"));
  EXPECT_NE(state_of(p("plain.html")).ino, old_ino);  // replaced atomically, not in place

  std::ostringstream out;
  run_memviz({t, "-", p("pic.svg").string()}, out);
  EXPECT_EQ(out.str().rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(read(p("pic.svg")).rfind("<svg", 0), 0u);
  EXPECT_EQ(temporaries_in(root_), std::vector<std::string>{});
}

// run_directory_evidence recognises a run and a checkpoint, and not a plan's record or a
// model folder.
TEST_F(OutputSafety, RunDirectoriesAreRecognisedByWhatTrainLeaves) {
  make("run/.fitgrad.lock", "");
  make("ckpt/trainer_state.json", "{}");
  make("pruned/x", "");
  fs::create_directories(p("pruned/.pruned-checkpoint-3"));
  make("plan/memory.json", "{}");
  make("plan/memory_trace.json", "{}");
  make("model/config.json", "{}");
  fs::create_directories(p("notes/checkpoint-notes"));
  EXPECT_EQ(run_directory_evidence(p("run")), ".fitgrad.lock");
  EXPECT_EQ(run_directory_evidence(p("ckpt")), "trainer_state.json");
  EXPECT_EQ(run_directory_evidence(p("pruned")), ".pruned-checkpoint-3");
  EXPECT_EQ(run_directory_evidence(p("plan")), "");
  EXPECT_EQ(run_directory_evidence(p("model")), "");
  EXPECT_EQ(run_directory_evidence(p("notes")), "");
}

// memplan never writes into a training run's directory (here a real run saved with
// --save_strategy no, the probe's case), nor does a dry run of train; memplan says where
// it writes, writes its record whole into a fresh directory, and replaces it only with
// --overwrite.
TEST_F(OutputSafety, MemplanNeverWritesIntoARunsDirectory) {
  TrainArgs run = args(write_text("data.txt", 400, 4), "run");
  run.save_strategy = "no";
  run.max_steps = 2;
  ASSERT_EQ(train(run), 0) << last_err_;
  std::vector<fs::path> watched;
  for (const auto& e : fs::recursive_directory_iterator(run.output_dir))
    watched.push_back(e.path());
  ASSERT_TRUE(fs::exists(p("run/memory.json")));

  MemplanArgs m;
  m.train.model = "gpt2-tiny";
  m.train.seq_len = 32;
  m.train.per_device_train_batch_size = 2;
  m.train.max_steps = 1;
  m.train.device = "cpu";
  m.overwrite = true;
  std::ostringstream out, err;
  for (const std::string& dir : {run.output_dir, (p("run") / "plan").string()}) {
    m.train.output_dir = dir;
    expect_refused(
        "memplan --output_dir " + dir, [&] { run_memplan(m, out, err); },
        {"[memplan] --output_dir", "a training run's directory", ".fitgrad.lock"}, watched);
  }
  EXPECT_FALSE(fs::exists(p("run/plan")));
  TrainArgs dry = args("", "run");
  dry.device = "meta";
  expect_refused(
      "train --device meta into the run", [&] { train(dry); },
      {"[train] --output_dir", "holds a real run's metrics.jsonl", "a dry run would replace"},
      watched);

  m.overwrite = false;
  m.train.output_dir = p("plans/a").string();
  ASSERT_EQ(run_memplan(m, out, err), 0) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("memory record: " + m.train.output_dir + " (memory.json, "));
  EXPECT_THAT(out.str(), HasSubstr("wrote the memory record into " + m.train.output_dir));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(m.train.output_dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"memory.html", "memory.json", "memory_summary.txt",
                                             "memory_trace.json", "peak_report.txt"}));
  expect_refused("memplan again without --overwrite", [&] { run_memplan(m, out, err); },
                 {"[memplan] --output_dir", "memory.json exists; pass --overwrite"},
                 {p("plans/a/memory.json")});
  m.overwrite = true;
  EXPECT_EQ(run_memplan(m, out, err), 0);

  // A plan that fails leaves no directory behind.
  m.train.output_dir = p("plans/b").string();
  m.train.seq_len = -3;
  EXPECT_THROW(run_memplan(m, out, err), Error);
  EXPECT_FALSE(fs::exists(p("plans/b")));
  m.train.seq_len = 32;
  m.fit = true;
  expect_refused("memplan --fit --output_dir", [&] { run_memplan(m, out, err); },
                 {"--output_dir keeps the memory record of one plan"}, {});
}

class ExportSafety : public OutputSafety {
 protected:
  void SetUp() override {
    OutputSafety::SetUp();
    auto base = nn::build_model(nn::preset("llama-tiny"), {.seed = 3});
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& [name, t] : base->named_parameters()) tensors.emplace_back(name, t);
    fs::create_directories(p("base"));
    io::save_safetensors(p("base/model.safetensors").string(), tensors);
    nn::LoraConfig lora;
    lora.r = 4;
    lora.alpha = 8;
    auto targets = std::make_shared<nn::TargetModules>(nn::TargetModules::parse("q_proj"));
    nn::BuildOptions o{.seed = 4};
    o.linear_factory = nn::targeted_factory(targets, nn::lora_factory(lora));
    auto model = nn::build_model(nn::preset("llama-tiny"), o);
    nn::save_lora_adapter(*model, p("adapter").string(), {lora, "q_proj", "base"});
  }
  ExportArgs args(const std::string& out, bool overwrite = false) const {
    ExportArgs a;
    a.merge = p("adapter").string();
    a.base = p("base/model.safetensors").string();
    a.out = out;
    a.overwrite = overwrite;
    return a;
  }
  void edit_config(const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = nlohmann::json::parse(read(p("adapter/adapter_config.json")));
    edit(j);
    std::ofstream(p("adapter/adapter_config.json")) << j.dump(2);
  }
};

// The probe's export cases: the output over the base, the adapter or a checkpoint's file
// is refused, whatever the spelling, and the files stay as they were.
TEST_F(ExportSafety, HostileExportOutputsAreRefusedAndChangeNothing) {
  fs::create_directories(p("base"));
  fs::create_directories(p("ckpt"));
  make("ckpt/fitgrad_checkpoint.json", "{}");
  make("ckpt/optimizer.safetensors", "optimizer state");
  const std::vector<fs::path> watched = {
      p("base/model.safetensors"), p("adapter/adapter_model.safetensors"),
      p("adapter/adapter_config.json"), p("ckpt/optimizer.safetensors")};
  std::ostringstream out;
  const std::vector<std::pair<ExportArgs, std::string>> cases = {
      {args(p("base/model.safetensors").string(), true), "is the input --base"},
      {args((root_ / "base/./model.safetensors").string(), true), "is the input --base"},
      {args((root_ / "adapter/../base/model.safetensors").string(), true), "is the input --base"},
      {args(p("adapter/adapter_model.safetensors").string(), true), "is the input --merge"},
      {args(p("ckpt/optimizer.safetensors").string(), true), "a training run's directory"},
      {args(p("ckpt/merged.safetensors").string(), true), "fitgrad_checkpoint.json"},
  };
  for (const auto& [hostile, error] : cases)
    expect_refused(
        "export -o " + hostile.out, [&, &hostile = hostile] { export_merged(hostile, out); },
        {"[export] -o", error}, watched);
  // A checkpoint directory given as --base: its model.safetensors is an input too.
  ExportArgs a = args(p("base/model.safetensors").string(), true);
  a.base = p("base").string();
  expect_refused(
      "export --base DIR -o DIR/model.safetensors", [&] { export_merged(a, out); },
      {"is the input --base"}, watched);

  a = args(p("merged.safetensors").string());
  EXPECT_EQ(export_merged(a, out), 2);
  expect_refused("export again", [&] { export_merged(a, out); },
                 {"merged.safetensors exists; pass --overwrite"}, {p("merged.safetensors")});
  a.overwrite = true;
  EXPECT_EQ(export_merged(a, out), 2);
}

// Adapters export cannot merge faithfully are refused by name (Note [Adapters export
// merges]), and nothing is written.
TEST_F(ExportSafety, AdaptersThatCannotMergeFaithfullyAreRefused) {
  std::ostringstream out;
  const std::string original = read(p("adapter/adapter_config.json"));
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases = {
      {[](nlohmann::json& j) { j["r"] = 0; }, "\"r\" must be a positive integer, got 0"},
      {[](nlohmann::json& j) { j["r"] = -4; }, "\"r\" must be a positive integer, got -4"},
      {[](nlohmann::json& j) { j["r"] = 2.5; }, "\"r\" must be a positive integer, got 2.5"},
      {[](nlohmann::json& j) { j["lora_alpha"] = 0; }, "it must be finite and positive"},
      {[](nlohmann::json& j) { j["lora_alpha"] = -8; }, "it must be finite and positive"},
      {[](nlohmann::json& j) { j["use_dora"] = true; }, "DoRA adapters are not supported"},
      // A key of another JSON type is named (issue 31: nlohmann's "type must be number").
      {[](nlohmann::json& j) { j["lora_alpha"] = "16"; },
       "\"lora_alpha\" is string \"16\", not a number"},
      {[](nlohmann::json& j) { j["use_dora"] = "no"; },
       "\"use_dora\" is string \"no\", not a boolean"},
      {[](nlohmann::json& j) {
         j["target_modules"] = {1, 2};
       },
       "\"target_modules\" is array [1,2], not a list of strings"},
      {[](nlohmann::json& j) { j.erase("lora_alpha"); }, "\"lora_alpha\" is missing"},
      {[](nlohmann::json& j) {
         j["rank_pattern"] = {{"q_proj", 8}};
       },
       "\"rank_pattern\" is not supported"},
      {[](nlohmann::json& j) { j["target_modules"] = {"nope"}; }, "not found in the model: nope"},
      {[](nlohmann::json& j) { j["target_modules"] = {"v_proj"}; },
       "holds factors for 'model.layers.0.self_attn.q_proj', which its target_modules (v_proj)"},
  };
  for (const auto& [edit, error] : cases) {
    std::ofstream(p("adapter/adapter_config.json")) << original;
    edit_config(edit);
    expect_refused("adapter: " + error,
                   [&] { export_merged(args(p("merged.safetensors").string()), out); }, {error},
                   {p("merged.safetensors")});
  }
  std::ofstream(p("adapter/adapter_config.json")) << original;
  EXPECT_EQ(export_merged(args(p("merged.safetensors").string()), out), 2);
}

// quantize: OUT over IN through a symlink or a hard link, or a write-protected OUT, is
// refused; the file stays.
TEST_F(ExportSafety, HostileQuantizeOutputsAreRefused) {
  fs::create_symlink("base/model.safetensors", p("link.safetensors"));
  make("ro.safetensors");
  fs::permissions(p("ro.safetensors"), fs::perms::owner_read);
  const std::vector<fs::path> watched = {p("base/model.safetensors"), p("link.safetensors"),
                                         p("ro.safetensors")};
  std::ostringstream out;
  for (const auto& [target, error] : std::vector<std::pair<std::string, std::string>>{
           {p("link.safetensors").string(), "is the input IN"},
           {(root_ / "base/../base/model.safetensors").string(), "is the input IN"},
           {p("ro.safetensors").string(), "is write-protected"}}) {
    QuantizeArgs a;
    a.in = p("base/model.safetensors").string();
    a.out = target;
    a.nf4 = true;
    a.overwrite = true;
    expect_refused(
        "quantize OUT " + target, [&] { quantize_model_file(a, out); },
        {"[quantize] OUT " + target, error}, watched);
  }
}

// generate --max_new_tokens: -1 and other negatives are refused like 0 (the default is
// "not given", not -1), naming the flag.
TEST(GenerateFlags, NegativeMaxNewTokensIsRefused) {
  for (const int64_t n : {int64_t(-1), int64_t(-60), int64_t(0), (int64_t(1) << 31) + 1}) {
    GenerateOptions o;
    o.model = "gpt2-tiny";
    o.prompt = "Hello";
    o.max_new_tokens = n;
    std::ostringstream out;
    try {
      generate(o, out);
      ADD_FAILURE() << "--max_new_tokens " << n << " was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("--max_new_tokens must be positive and at most 2^31, got " +
                                      std::to_string(n)));
    }
  }
}

// Numeric flags of these commands refuse negative and out-of-range values by name, before
// anything is planned or loaded.
TEST(NumericFlags, NegativeAndOutOfRangeValuesAreRefusedByName) {
  struct Case {
    std::function<void(MemplanArgs&)> edit;
    std::string error;
  };
  const std::vector<Case> cases = {
      {[](MemplanArgs& m) { m.seq_limit = -1; }, "--seq_limit must be positive"},
      {[](MemplanArgs& m) { m.seq_limit = int64_t(1) << 40; }, "--seq_limit must be at most"},
      {[](MemplanArgs& m) { m.batch_limit = 0; }, "--batch_limit must be in [1, 1048576], got 0"},
      {[](MemplanArgs& m) { m.batch_limit = int64_t(1) << 40; }, "--batch_limit must be in"},
      {[](MemplanArgs& m) { m.device_memory = "0"; }, "--device_memory must be more than 0"},
      {[](MemplanArgs& m) { m.device_memory = "-5GiB"; }, "--device_memory '-5GiB' is not a size"},
      {[](MemplanArgs& m) {
         m.train.device = "cuda";
         m.device_memory = "0";
       },
       "--device_memory must be more than 0"},
      {[](MemplanArgs& m) {
         m.train.device = "cuda";
         m.context_reserve = "-1GiB";
       },
       "--context_reserve '-1GiB' is not a size"},
  };
  for (const Case& c : cases) {
    MemplanArgs m;
    m.train.model = "gpt2-tiny";
    m.train.device = "cpu";
    c.edit(m);
    std::ostringstream out, err;
    try {
      run_memplan(m, out, err);
      ADD_FAILURE() << "not refused: " << c.error;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("[memplan] " + c.error));
    }
  }
  QuantizeArgs q;
  q.in = "in.safetensors";
  q.out = "out.safetensors";
  q.nf4 = true;
  q.blocksize = -64;
  std::ostringstream out;
  try {
    quantize_model_file(q, out);
    ADD_FAILURE() << "--blocksize -64 was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("[quantize] --blocksize must be a power of two"));
  }
}

// The commands that write offer --overwrite, and --max_new_tokens parses into an option.
TEST(OutputFlags, EveryWritingCommandHasOverwrite) {
  CLI::App app;
  ExportArgs e;
  QuantizeArgs q;
  add_export_command(app, e);
  add_quantize_command(app, q);
  add_memviz_command(app);
  add_memplan_command(app);
  add_generate_command(app);
  for (const char* command : {"export", "quantize", "memviz", "memplan"})
    EXPECT_NO_THROW(app.get_subcommand(command)->get_option("--overwrite")) << command;
  app.parse(std::vector<std::string>{"b.safetensors", "a.safetensors", "--nf4", "--overwrite",
                                     "quantize"});
  EXPECT_TRUE(q.overwrite);
}

}  // namespace
}  // namespace fitgrad::apps
