// Run safety (issue 11): one test per class of failure that broke the promise "no abort on
// any input, one owner per output directory, checkpoints that are verified, complete and
// never someone else's". Each reproduces the case and checks the clear error and that
// nothing was lost.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <new>
#include <set>
#include <sstream>
#include <system_error>

#include "apps/export.h"
#include "apps/generate.h"
#include "apps/guard.h"
#include "apps/inference_model.h"
#include "apps/inspect.h"
#include "apps/quantize.h"
#include "apps/train/train_options.h"
#include "data/gguf_tokenizer.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "tensor/error.h"
#include "tests/train/train_fixture.h"
#include "train/checkpoint_dir.h"
#include "train/metrics.h"
#include "train/model_source.h"
#include "train/output_lock.h"
#include "train/train_args.h"

namespace fitgrad::apps {

using train::commit_checkpoint;
using train::resolve_resume_dir;
using train::save_tokenizer_spec;
using train::validate;
using train::verify_checkpoint;

using train::GenerateStats;
using train::kCheckpointManifest;
using train::kExitOutOfMemory;
using train::list_checkpoints;
using train::load_model;
using train::LoadedModel;
using train::MetricsLog;
using train::OutputDirLock;
using train::prune_checkpoints;
using train::run_train;
using train::TrainArgs;
namespace {
namespace fs = std::filesystem;
using ::testing::HasSubstr;

class RunSafety : public test_train::TrainFixture {
 protected:
  // The error of a run that must be refused.
  std::string refusal(const TrainArgs& a) {
    try {
      train(a);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "the run into " << a.output_dir << " was not refused";
    return "";
  }
  // Trains `steps` steps on `data` into "out" and flips a byte of its last checkpoint's
  // weights (their size kept); returns that checkpoint.
  fs::path damaged_checkpoint(const std::string& data, int64_t steps) {
    TrainArgs a = args(data, "out");
    a.max_steps = steps;
    EXPECT_EQ(train(a), 0);
    const fs::path ckpt = fs::path(a.output_dir) / fmt::format("checkpoint-{}", steps);
    std::string bytes = read_bytes(ckpt / "model.safetensors");
    bytes[bytes.size() - 5] ^= 0x40;
    std::ofstream(ckpt / "model.safetensors", std::ios::binary) << bytes;
    return ckpt;
  }
  static std::vector<std::string> names_in(const fs::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

// 1. No uncaught exception: whatever a command throws becomes one line and exit 1.
TEST_F(RunSafety, NoUncaughtException) {
  auto guarded = [](const std::function<int()>& body) {
    std::ostringstream out, err;
    const int code = run_guarded("test", out, err, body);
    return std::pair{code, err.str()};
  };
  const auto [fs_code, fs_line] = guarded([]() -> int {
    throw fs::filesystem_error("status", fs::path("/x/a.gguf"),
                               std::make_error_code(std::errc::too_many_symbolic_link_levels));
  });
  EXPECT_EQ(fs_code, 1);
  EXPECT_THAT(fs_line, HasSubstr("error: [test] /x/a.gguf: Too many levels of symbolic links"));
  EXPECT_EQ(guarded([]() -> int { throw std::bad_alloc(); }).second,
            "error: [test] out of host memory\n");
  EXPECT_EQ(guarded([]() -> int {
              throw std::system_error(
                  std::make_error_code(std::errc::resource_unavailable_try_again), "thread");
            }).first,
            1);
  EXPECT_EQ(guarded([] { return 0; }).first, 0);

  // A symlink loop as --model, and one named checkpoint-9 in --output_dir.
  const std::string data = write_text("text.txt", 997, 3);
  fs::create_symlink(root_ / "b.gguf", root_ / "a.gguf");
  fs::create_symlink(root_ / "a.gguf", root_ / "b.gguf");
  TrainArgs loop = args(data, "loop");
  loop.model = (root_ / "a.gguf").string();
  std::ostringstream out, err;
  EXPECT_EQ(run_guarded("train", out, err, [&] { return run_train(loop, out, err); }), 1);
  EXPECT_THAT(err.str(), HasSubstr("a.gguf"));
  TrainArgs beside = args(data, "beside");
  fs::create_directories(beside.output_dir);
  fs::create_symlink(fs::path(beside.output_dir) / "checkpoint-9",
                     fs::path(beside.output_dir) / "checkpoint-9");
  beside.max_steps = 2;
  EXPECT_EQ(train(beside), 0);  // the loop is no checkpoint: neither listed nor touched
  EXPECT_TRUE(fs::is_symlink(fs::path(beside.output_dir) / "checkpoint-9"));

  TrainArgs workers = args(data, "workers");
  workers.dataloader_num_workers = 100000;
  EXPECT_THAT(refusal(workers), HasSubstr("--dataloader_num_workers must be in [0, 64]"));
}

// 2. One run per output directory: a live holder refuses the second run by pid; a lock file
// left by a dead run does not block.
TEST_F(RunSafety, OneRunPerOutputDirectory) {
  const std::string data = write_text("text.txt", 997, 3);
  TrainArgs a = args(data, "out");
  fs::create_directories(a.output_dir);
  {
    const OutputDirLock held(a.output_dir);
    EXPECT_THAT(refusal(a),
                HasSubstr(fmt::format("is in use by another fitgrad run (pid {})", ::getpid())));
  }
  std::ofstream(fs::path(a.output_dir) / ".fitgrad.lock") << "999999\n";  // a dead holder
  a.max_steps = 2;
  EXPECT_EQ(train(a), 0);
}

// 3. Never pick or overwrite another run's checkpoints.
TEST_F(RunSafety, NeverPickOrOverwriteAnotherRunsCheckpoints) {
  const std::string data = write_text("text.txt", 997, 3);
  TrainArgs first = args(data, "out");  // checkpoints 3 and 6
  ASSERT_EQ(train(first), 0);

  // An older checkpoint while later ones exist: refused, or with --overwrite_output_dir the
  // later ones move aside and `last` is the resumed run's.
  TrainArgs older = args(data, "out");
  older.resume_from_checkpoint = (fs::path(first.output_dir) / "checkpoint-3").string();
  EXPECT_THAT(refusal(older), HasSubstr("holds later checkpoints (checkpoint-6)"));

  // Another directory's checkpoint into one that holds checkpoints: refused.
  TrainArgs other = args(data, "other");
  other.max_steps = 2;
  other.save_steps = 1;
  ASSERT_EQ(train(other), 0);
  TrainArgs cross = args(data, "other");
  cross.resume_from_checkpoint = (fs::path(first.output_dir) / "checkpoint-3").string();
  EXPECT_THAT(refusal(cross), HasSubstr("holds another run's checkpoints (checkpoint-1, "
                                        "checkpoint-2)"));

  // A fresh run with --overwrite_output_dir moves the old run aside (nothing is deleted),
  // so `last` is its own; a user's file named like a checkpoint is never touched.
  std::ofstream(fs::path(first.output_dir) / "checkpoint-7") << "my notes";
  fs::create_directories(fs::path(first.output_dir) / "checkpoint-8");
  TrainArgs fresh = args(data, "out");
  fresh.overwrite_output_dir = true;
  fresh.max_steps = 2;
  fresh.save_steps = 1;
  fresh.save_total_limit = 1;
  ASSERT_EQ(train(fresh), 0);
  const auto listed = list_checkpoints(fresh.output_dir);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].first, 2);
  EXPECT_EQ(test_train::TrainFixture::read_bytes(fs::path(first.output_dir) / "checkpoint-7"),
            "my notes");
  EXPECT_TRUE(fs::is_directory(fs::path(first.output_dir) / "checkpoint-8"));
  int moved = 0;
  for (const auto& e : fs::directory_iterator(first.output_dir))
    if (e.path().filename().string().starts_with("overwritten-")) {
      EXPECT_EQ(names_in(e.path()), (std::vector<std::string>{
                                        "checkpoint-3", "checkpoint-6", "loss_curve.svg",
                                        "memory.html", "memory.json", "memory_summary.txt",
                                        "memory_trace.json", "metrics.jsonl", "peak_report.txt"}));
      ++moved;
    }
  EXPECT_EQ(moved, 1);
  EXPECT_EQ(metrics(fresh.output_dir).size(), 2u + 1u);  // two steps and the final evaluation
}

// A run that saved no checkpoint (--save_strategy no, or killed before its first save) still
// has records: a second run into its directory is refused by name, and with
// --overwrite_output_dir moves them aside (issue "Run truth III", finding 3).
TEST_F(RunSafety, ARunWithoutCheckpointsIsNotReplacedWithoutAWord) {
  const std::string data = write_text("text.txt", 997, 3);
  TrainArgs first = args(data, "unsaved");
  first.max_steps = 2;
  first.save_strategy = "no";
  ASSERT_EQ(train(first), 0);
  const std::string before =
      test_train::TrainFixture::read_bytes(fs::path(first.output_dir) / "metrics.jsonl");
  EXPECT_THAT(refusal(first), HasSubstr("holds another run's metrics.jsonl, loss_curve.svg"));
  EXPECT_EQ(test_train::TrainFixture::read_bytes(fs::path(first.output_dir) / "metrics.jsonl"),
            before);
  TrainArgs again = first;
  again.overwrite_output_dir = true;
  ASSERT_EQ(train(again), 0);
  int moved = 0;
  for (const auto& e : fs::directory_iterator(first.output_dir))
    if (e.path().filename().string().starts_with("overwritten-")) {
      EXPECT_EQ(test_train::TrainFixture::read_bytes(e.path() / "metrics.jsonl"), before);
      ++moved;
    }
  EXPECT_EQ(moved, 1);
}

// 4. Pruning is atomic: a checkpoint is renamed out of the listing before it is deleted,
// and a directory without a complete manifest is never a checkpoint.
TEST_F(RunSafety, PruningAndSavingAreAtomic) {
  const fs::path out = root_ / "out";
  fs::create_directories(out);
  for (int step : {1, 2, 3})
    commit_checkpoint(out.string(), step, [](const std::string& d) {
      std::ofstream(fs::path(d) / "trainer_state.json") << "{}";
    });
  // What a kill during a delete leaves: a half-emptied renamed directory.
  fs::create_directories(out / ".pruned-checkpoint-0");
  EXPECT_TRUE(prune_checkpoints(out.string(), 1).empty());
  EXPECT_EQ(names_in(out), (std::vector<std::string>{"checkpoint-3"}));  // the leftover too
  const auto listed = list_checkpoints(out.string());
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].first, 3);
  // A checkpoint that lost a file is not resumable, and the error names the file.
  fs::remove(out / "checkpoint-3" / "trainer_state.json");
  try {
    resolve_resume_dir("last", out.string());
    ADD_FAILURE() << "an incomplete checkpoint was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("trainer_state.json] is missing"));
  }
}

// 5. Checkpoints are verified: flipped bytes and bad trainer_state.json fields name the file.
TEST_F(RunSafety, CheckpointsAreVerified) {
  const std::string data = write_text("text.txt", 997, 3);
  damaged_checkpoint(data, 3);
  TrainArgs resume = args(data, "out");
  resume.resume_from_checkpoint = "last";
  EXPECT_THAT(refusal(resume), HasSubstr("model.safetensors] does not match its content hash"));

  // A trainer_state.json with a bad global_step, under a manifest that matches it.
  for (const char* bad : {"-5", "2.7"}) {
    TrainArgs fresh = args(data, std::string("fresh") + bad);
    fresh.max_steps = 3;
    ASSERT_EQ(train(fresh), 0);
    const fs::path src = fs::path(fresh.output_dir) / "checkpoint-3";
    nlohmann::json state = nlohmann::json::parse(read_bytes(src / "trainer_state.json"));
    state["global_step"] = nlohmann::json::parse(bad);
    const fs::path edited = root_ / (std::string("edited") + bad);
    fs::create_directories(edited);
    commit_checkpoint(edited.string(), 3, [&](const std::string& d) {
      for (const auto& e : fs::directory_iterator(src))
        if (e.path().filename() != kCheckpointManifest)
          fs::copy_file(e.path(), fs::path(d) / e.path().filename());
      std::ofstream(fs::path(d) / "trainer_state.json", std::ios::trunc) << state.dump();
    });
    TrainArgs r = args(data, std::string("resumed") + bad);
    r.resume_from_checkpoint = (edited / "checkpoint-3").string();
    const std::string why = refusal(r);
    EXPECT_THAT(why, HasSubstr("trainer_state.json] 'global_step' must be a non-negative integer"));
  }
}

// Note [Verified reads]: every command that reads a checkpoint checks it against its manifest
// first, and the error names the command's option, the damaged file and the flag that skips the
// check; with the flag the checkpoint is read as it is.
TEST_F(RunSafety, EveryReaderVerifiesTheCheckpoint) {
  const std::string data = write_text("text.txt", 997, 3);
  const fs::path ckpt = damaged_checkpoint(data, 2);
  const auto refused = [&](const std::function<void()>& read, const std::string& what) {
    try {
      read();
      ADD_FAILURE() << what << " read a damaged checkpoint";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("[" + what + " " + ckpt.string() + "]")) << e.what();
      EXPECT_THAT(e.what(), HasSubstr("model.safetensors] does not match its content hash"));
      EXPECT_THAT(e.what(), HasSubstr("add --skip_checkpoint_verification"));
    }
  };
  InferenceModelOptions o;
  o.model = ckpt.string();
  refused([&] { load_inference_model("generate", o); }, "generate --model");
  InferenceModelOptions with_adapter;
  with_adapter.model = "gpt2-tiny";
  with_adapter.adapter = ckpt.string();
  refused([&] { load_inference_model("eval", with_adapter); }, "eval --adapter");
  ExportArgs e;
  e.base = ckpt.string();
  e.out = (root_ / "exported").string();
  std::ostringstream out;
  refused([&] { export_merged(e, out); }, "export --base");
  QuantizeArgs q;
  q.in = ckpt.string();
  q.out = (root_ / "q.safetensors").string();
  q.nf4 = true;
  refused([&] { quantize_model_file(q, out); }, "quantize IN");
  TrainArgs from = args(data, "from-checkpoint");
  from.model = ckpt.string();
  refused([&] { train(from); }, "train --model");
  TrainArgs resume = args(data, "out");
  resume.resume_from_checkpoint = "last";
  resume.max_steps = 3;
  refused([&] { train(resume); }, "train --resume_from_checkpoint");

  // Read as it is with the flag; a plan on meta reads no weights and checks nothing.
  o.skip_verification = true;
  EXPECT_NO_THROW(load_inference_model("generate", o));
  e.skip_verification = true;
  EXPECT_NO_THROW(export_merged(e, out));
  q.skip_verification = true;
  EXPECT_NO_THROW(quantize_model_file(q, out));
  resume.skip_checkpoint_verification = true;
  EXPECT_EQ(train(resume), 0);
  nn::BuildOptions meta;
  meta.device = Device::meta();
  EXPECT_NO_THROW(load_model(ckpt.string(), "", meta));
}

// 6. Checkpoints are self-contained: a checkpoint of a model whose tokenizer came from a GGUF
// file stores the vocabulary, so it loads and encodes the same after the file is gone.
TEST_F(RunSafety, CheckpointsAreSelfContained) {
  const fs::path gguf = root_ / "model.gguf";
  fs::copy_file(fs::path(FITGRAD_GOLDEN_DIR) / "smollm2_slice.gguf", gguf);
  const io::GgufFile file = io::GgufFile::open(gguf.string());
  const std::unique_ptr<data::Tokenizer> original_ptr = data::tokenizer_from_gguf(file);
  const data::Tokenizer& original = *original_ptr;
  nn::ModelConfig cfg = nn::preset("llama-tiny");
  cfg.vocab_size = original.vocab_size();
  const fs::path dir = root_ / "checkpoint";
  fs::create_directories(dir);
  const auto model = nn::build_model(cfg, {.seed = 1});
  io::save_safetensors((dir / "model.safetensors").string(), model->named_parameters());
  std::ofstream(dir / "config.json") << nn::config_to_json(cfg).dump();
  save_tokenizer_spec(dir.string(), "gguf:" + gguf.string(), data::gguf_vocabulary(file));
  fs::remove(gguf);

  const LoadedModel loaded = load_model(dir.string(), "", {});
  EXPECT_EQ(loaded.tokenizer_id, "gguf:" + gguf.string());
  const std::string text = "It is a truth universally acknowledged, <|im_start|> said she.";
  EXPECT_EQ(loaded.tokenizer->encode(text, true), original.encode(text, true));
  EXPECT_EQ(loaded.tokenizer->vocab_size(), original.vocab_size());
}

// 7. Numbers are checked before use: every numeric flag has a range that its error states.
TEST_F(RunSafety, NumbersAreCheckedBeforeUse) {
  const double inf = std::numeric_limits<double>::infinity();
  struct Row {
    std::function<void(TrainArgs&)> change;
    const char* expect;
  };
  const std::vector<Row> rows = {
      {[&](TrainArgs& a) { a.num_train_epochs = inf, a.max_steps = -1; }, "--num_train_epochs"},
      {[](TrainArgs& a) { a.num_train_epochs = 1e17, a.max_steps = -1; }, "--num_train_epochs"},
      {[](TrainArgs& a) { a.num_train_epochs = NAN, a.max_steps = -1; }, "--num_train_epochs"},
      {[](TrainArgs& a) { a.gradient_accumulation_steps = std::numeric_limits<int64_t>::max(); },
       "--gradient_accumulation_steps must be in [1, 1000000]"},
      {[&](TrainArgs& a) { a.learning_rate = inf; }, "--learning_rate must be a finite number"},
      {[&](TrainArgs& a) { a.weight_decay = inf; }, "--weight_decay must be a finite number"},
      {[](TrainArgs& a) { a.max_grad_norm = NAN; }, "--max_grad_norm must be a finite number"},
      {[](TrainArgs& a) { a.max_steps = std::numeric_limits<int64_t>::max(); }, "--max_steps"},
      {[](TrainArgs& a) { a.save_steps = -1; }, "--save_steps must be in [0,"},
      {[](TrainArgs& a) { a.seq_len = int64_t(1) << 40; }, "--seq_len must be in [1,"},
      {[](TrainArgs& a) { a.warmup_steps = -1; }, "--warmup_steps must be in [0,"},
      {[&](TrainArgs& a) { a.adam_epsilon = inf; }, "--adam_epsilon"},
      {[](TrainArgs& a) { a.checkpoint_segments = -1; }, "--checkpoint_segments must be in [0,"},
      {[](TrainArgs& a) { a.checkpoint_segments = 2; },
       "--checkpoint_segments needs --gradient_checkpointing"},
      {[](TrainArgs& a) { a.eval_strategy = "epoch"; }, "--eval_strategy must be steps or no"},
  };
  for (const Row& row : rows) {
    TrainArgs a = args("unused.txt", "numbers");
    row.change(a);
    try {
      validate(a);
      ADD_FAILURE() << row.expect << ": accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(row.expect));
    }
  }
  // --seed is a 64-bit unsigned integer in digits; nothing wraps or saturates.
  for (const char* seed : {"-1", "18446744073709551616", "1e23", "nan", "7x"}) {
    CLI::App app;
    TrainArgs a;
    add_train_options(app, a);
    std::vector<std::string> argv = {"--data", "d", "--output_dir", "o", "--seed", seed};
    std::reverse(argv.begin(), argv.end());
    try {
      app.parse(argv);
      ADD_FAILURE() << "--seed " << seed << " was accepted as " << a.seed;
    } catch (const CLI::ParseError& e) {
      EXPECT_THAT(e.what(), HasSubstr("--seed")) << seed;
    }
  }
  CLI::App app;
  TrainArgs a;
  add_train_options(app, a);
  std::vector<std::string> argv = {"--data", "d",      "--output_dir",
                                   "o",      "--seed", "18446744073709551615"};
  std::reverse(argv.begin(), argv.end());
  app.parse(argv);
  EXPECT_EQ(a.seed, std::numeric_limits<uint64_t>::max());
}

// The sweep: every numeric flag of `train` gets 0, -1, NaN, inf, 2^63-1 and a non-number.
// Each value is accepted exactly when it lies in the flag's stated range; otherwise the
// command line or validate() refuses it with an error that names the flag.
TEST(RunSafetySweep, EveryNumericFlagHasARange) {
  const std::vector<std::string> values = {"0", "-1", "nan", "inf", "9223372036854775807", "abc"};
  // Flag -> the values of `values` it accepts.
  const std::map<std::string, std::set<std::string>> accepts = {
      {"seq_len", {}},
      {"per_device_train_batch_size", {}},
      {"per_device_eval_batch_size", {}},
      {"gradient_accumulation_steps", {}},
      {"logging_steps", {}},
      {"dataloader_prefetch_factor", {}},
      {"warmup_steps", {"0"}},
      {"torch_empty_cache_steps", {"0"}},
      {"dataloader_num_workers", {"0"}},
      {"eval_steps", {"0"}},
      {"eval_max_batches", {"0"}},
      {"save_steps", {"0"}},
      {"save_total_limit", {"0"}},
      {"checkpoint_segments", {"0"}},
      {"max_steps", {"-1"}},
      {"seed", {"0", "9223372036854775807"}},
      {"learning_rate", {}},
      {"adam_epsilon", {}},
      {"val_fraction", {}},
      {"num_train_epochs", {}},
      {"weight_decay", {"0"}},
      {"max_grad_norm", {"0"}},
      {"warmup_ratio", {"0"}},
      {"adam_beta1", {"0"}},
      {"adam_beta2", {"0"}},
      {"ddp_timeout", {}},
      {"ddp_bucket_cap_mb", {}},
      {"zero_stage", {"0"}},
  };
  for (const auto& [flag, ok] : accepts)
    for (const std::string& v : values) {
      CLI::App app;
      TrainArgs a;
      add_train_options(app, a);
      std::vector<std::string> argv = {"--data", "d", "--output_dir", "o", "--" + flag, v};
      std::reverse(argv.begin(), argv.end());
      std::string refused;
      try {
        app.parse(argv);
        validate(a);
      } catch (const CLI::ParseError& e) {
        refused = e.what();
      } catch (const Error& e) {
        refused = e.what();
      }
      if (ok.count(v)) {
        EXPECT_EQ(refused, "") << "--" << flag << " " << v;
      } else {
        EXPECT_THAT(refused, HasSubstr("--" + flag)) << "--" << flag << " " << v << " was accepted";
      }
    }
}

// 9. The output directory is not training data: either inside the other is refused.
TEST_F(RunSafety, TheOutputDirectoryIsNotTrainingData) {
  fs::create_directories(root_ / "corpus");
  write_text("corpus/text.txt", 997, 3);
  TrainArgs inside = args((root_ / "corpus").string(), "corpus/run");
  EXPECT_THAT(refusal(inside), HasSubstr("is inside --data"));
  TrainArgs data_inside = args((root_ / "out" / "text.txt").string(), "out");
  fs::create_directories(root_ / "out");
  write_text("out/text.txt", 997, 3);
  EXPECT_THAT(refusal(data_inside), HasSubstr("is inside --output_dir"));
  EXPECT_FALSE(fs::exists(root_ / "corpus" / "run"));
}

// 10. A full disk while appending metrics.jsonl is an error that says why.
TEST_F(RunSafety, AFullDiskWhileLoggingSaysWhy) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  const fs::path path = root_ / "metrics.jsonl";
  MetricsLog log(path.string(), {nlohmann::json{{"step", 1}}});
  fs::remove(path);
  fs::create_symlink("/dev/full", path);
  try {
    log.append(nlohmann::json{{"step", 2}});
    ADD_FAILURE() << "the append succeeded on a full disk";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot append a metrics record: No space left on device"));
  }
  EXPECT_EQ(log.history().size(), 1u);
}

// 10. generate's default fits any context, and a huge --max_new_tokens is refused by name
// instead of overflowing.
TEST(RunSafetyGenerate, TheDefaultFitsTheContextAndHugeCountsAreRefused) {
  GenerateOptions o;
  o.model = "gpt2-tiny";  // 64 positions
  o.prompt = "Hello there";
  std::ostringstream out;
  const GenerateStats stats = generate(o, out);
  EXPECT_GT(stats.clamped_to, 0);
  EXPECT_EQ(stats.new_tokens, stats.clamped_to);
  EXPECT_EQ(stats.prompt_tokens + stats.new_tokens - 1, 64);
  o.max_new_tokens = std::numeric_limits<int64_t>::max();
  try {
    generate(o, out);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("--max_new_tokens must be positive and at most 2^31"));
  }
}

// 10. An out-of-memory in the evaluation after step 1 says so, and step 1 is saved.
TEST_F(RunSafety, AnOutOfMemoryInAnEvaluationKeepsTheStep) {
  TrainArgs a = args(write_text("text.txt", 997, 30), "out");
  a.per_device_train_batch_size = 2;
  a.per_device_eval_batch_size = 512;
  a.eval_steps = 1;
  a.memory_budget = "8MiB";
  EXPECT_EQ(train(a), kExitOutOfMemory);
  EXPECT_THAT(last_err_, HasSubstr("out of memory in the evaluation after step 1"));
  const auto kept = list_checkpoints(a.output_dir);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].first, 1);
  verify_checkpoint(kept[0].second);
}

// 10. A failed run leaves nothing beside the user's data, and the messages for a directory
// as --init, a device file as --model and a symlink loop say what is wrong.
TEST_F(RunSafety, FailedRunsLeaveNothingAndSayWhatIsWrong) {
  const std::string latin1 = write_file("latin1.txt", std::string(300, 'a') + "caf\xe9");
  TrainArgs a = args(latin1, "out");
  EXPECT_THAT(refusal(a), HasSubstr("is not valid UTF-8"));
  EXPECT_FALSE(fs::exists(latin1 + ".fitgrad-cache"));

  const std::string data = write_text("text.txt", 997, 3);
  TrainArgs dir_init = args(data, "init");
  dir_init.init = root_.string();
  EXPECT_THAT(refusal(dir_init), HasSubstr("is a directory; --init takes a .safetensors"));
  TrainArgs device = args(data, "device");
  device.model = "/dev/null";
  EXPECT_THAT(refusal(device), HasSubstr("is not a regular file or a directory"));
  fs::create_symlink(root_ / "y.gguf", root_ / "x.gguf");
  fs::create_symlink(root_ / "x.gguf", root_ / "y.gguf");
  std::ostringstream out;
  try {
    inspect_file((root_ / "x.gguf").string(), out);
    ADD_FAILURE() << "a symlink loop was inspected";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("Too many levels of symbolic links"));
  }
}

}  // namespace
}  // namespace fitgrad::apps
