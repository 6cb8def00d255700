// `fitgrad train` on instruction and chat data (train/train_sft.h): a messages .jsonl
// (tests/golden/sft/records/) with a folder's tokenizer.json and SmolLM2's chat template.
// With a learning rate of 1e-12 the first step's logged loss and the evaluation's are the model's
// cross-entropy over exactly the trained targets of the examples, as data::SftEncoder (held to
// jinja2 and `tokenizers` in tests/data/sft_test.cpp) masks them, computed here example by
// example: the packed rows (two examples sharing one, Note [Packed rows]), the padding and the
// masks reach the loss as they should. The run's --report_to tensorboard events hold its
// metrics; the dry run allocates as the real run for each --packing. Batches grouped by length
// are cut to their longest example with the same loss, and the dry run plans them so.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/generate.h"
#include "apps/train/train_options.h"
#include "autograd/grad_mode.h"
#include "data/sft_encode.h"
#include "data/sft_records.h"
#include "data/window_order.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/tensor/ops/op_harness.h"
#include "tests/train/memory_trace.h"
#include "tests/train/sft_model_folder.h"
#include "tests/train/train_fixture.h"
#include "train/metrics.h"
#include "train/model_source.h"
#include "train/train_args.h"

namespace fitgrad::apps::test_train {

using train::generate_after;
using train::run_train;
using train::tensorboard_scalars;

using train::load_model;
using train::LoadedModel;
using train::TrainArgs;
namespace {

class TrainSft : public TrainFixture {
 protected:
  // The tiny model folder of tests/train/sft_model_folder.h; returns its config.json's path.
  std::string folder() { return fitgrad::testing::write_sft_model_folder(root_ / "model"); }
  // A copy of a golden record file (tests/golden/sft/records/) in the test's folder, so that
  // the encodings' cache beside it starts empty and stays out of the source tree.
  std::string records(const std::string& name) {
    const fs::path dir = root_ / "records";
    fs::create_directories(dir);
    if (!fs::exists(dir / name))
      fs::copy_file(fs::path(FITGRAD_GOLDEN_DIR) / "sft" / "records" / name, dir / name);
    return (dir / name).string();
  }
  // Every record of `data` encoded as the run encodes it: the tokenizer of `loaded`, the chat
  // template of the model folder whose config.json is `model`.
  static std::vector<data::SftTokens> encode_records(const LoadedModel& loaded,
                                                     const std::string& model,
                                                     const std::string& data) {
    const data::ChatTemplate chat = data::ChatTemplate::parse(
        (std::stringstream()
         << std::ifstream(fs::path(model).parent_path() / "chat_template.jinja").rdbuf())
            .str(),
        "smollm2");
    const data::SftEncoder encoder(*loaded.tokenizer, &chat, "test", {.add_bos = false});
    std::vector<data::SftTokens> out;
    for (const data::SftExample& e : data::read_sft_examples(data))
      out.push_back(encoder.encode(e));
    return out;
  }
};

// The one event file in `dir` (--report_to tensorboard) holds the version event, then one event
// per metrics record, each a whole TFRecord with good masked CRCs whose bytes are the record's
// scalars at its step (io/tfevents.h, held to TensorBoard's own writer in
// tests/io/tfevents_test.cpp).
void expect_events_hold(const fs::path& dir, const std::vector<nlohmann::json>& rows) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u) << dir;
  EXPECT_NE(files[0].filename().string().find("tfevents"), std::string::npos);
  const std::string bytes = (std::stringstream() << std::ifstream(files[0]).rdbuf()).str();
  std::vector<std::string> records;
  for (size_t at = 0; at < bytes.size();) {
    ASSERT_LE(at + 12, bytes.size());
    uint64_t n = 0;
    std::memcpy(&n, bytes.data() + at, 8);
    ASSERT_LE(at + 16 + n, bytes.size());
    uint32_t crc = 0;
    std::memcpy(&crc, bytes.data() + at + 12 + n, 4);
    records.push_back(bytes.substr(at + 12, n));
    EXPECT_EQ(crc, io::masked_crc32c(records.back().data(), n));
    at += 16 + n;
  }
  ASSERT_EQ(records.size(), rows.size() + 1);
  for (size_t i = 0; i < rows.size(); ++i) {
    double wall_time = 0;  // field 1, a double, first in the event (0x09, 8 bytes)
    ASSERT_EQ(records[i + 1][0], '\x09');
    std::memcpy(&wall_time, records[i + 1].data() + 1, 8);
    EXPECT_EQ(records[i + 1], io::scalar_event(rows[i].at("step").get<int64_t>(), wall_time,
                                               tensorboard_scalars(rows[i])))
        << rows[i].dump();
  }
  EXPECT_EQ(tensorboard_scalars({{"step", 3}, {"loss", 2.5}, {"eval_loss", 1.0}}),
            (io::Scalars{{"eval/loss", 1.0}, {"train/loss", 2.5}}));  // in the keys' order
}

// The mean cross-entropy of `model` over the trained targets of `examples`.
double masked_loss(const nn::CausalLM& model, const std::vector<data::SftTokens>& examples) {
  autograd::NoGradGuard no_grad;
  double sum = 0;
  int64_t n = 0;
  for (const data::SftTokens& e : examples) {
    const auto t = int64_t(e.ids.size()) - 1;
    std::vector<int64_t> ids(e.ids.begin(), e.ids.end() - 1), targets;
    for (int64_t i = 1; i <= t; ++i)
      targets.push_back(e.trained[size_t(i)] ? e.ids[size_t(i)] : -100);
    const int64_t count =
        std::count_if(targets.begin(), targets.end(), [](int64_t x) { return x >= 0; });
    const double loss = model
                            .loss(Tensor::from_vector(ids, {1, t}, DType::i64),
                                  Tensor::from_vector(targets, {1, t}, DType::i64))
                            .item();
    sum += loss * double(count);
    n += count;
  }
  return sum / double(n);
}

TEST_F(TrainSft, TheLossIsTheMeanOverTheAssistantTokens) {
  const std::string model = folder();
  const std::string data = records("messages.jsonl");
  TrainArgs a = args(data, "run");
  a.model = model;
  a.seq_len = 256;
  a.per_device_train_batch_size = 2;  // the 3 training examples packed into 2 rows
  a.per_device_eval_batch_size = 1;
  a.val_fraction = 0.25;    // the 4th example
  a.learning_rate = 1e-12;  // the checkpoint keeps the weights the step's loss saw
  a.max_steps = 1;
  a.eval_steps = 1;
  a.save_steps = 0;
  a.report_to = "tensorboard";
  std::ostringstream out, err;
  ASSERT_EQ(run_train(a, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("4 examples (4 messages; 3 train, 1 validation"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("packing: bfd: 3 training examples in 2 rows of 256"), std::string::npos)
      << out.str();

  const LoadedModel loaded = load_model((root_ / "run" / "checkpoint-1").string(), "", {});
  const std::vector<data::SftTokens> encoded = encode_records(loaded, model, data);
  ASSERT_EQ(encoded.size(), 4u);
  const std::vector<data::SftTokens> train(encoded.begin(), encoded.begin() + 3);
  const std::vector<data::SftTokens> val(encoded.begin() + 3, encoded.end());
  for (const data::SftTokens& e : train) ASSERT_LE(int64_t(e.ids.size()), a.seq_len);

  const std::vector<nlohmann::json> rows = metrics(a.output_dir);
  double loss = NAN, eval_loss = NAN;
  for (const nlohmann::json& r : rows) {
    if (r.contains("loss")) loss = r.at("loss").get<double>();
    if (r.contains("eval_loss")) eval_loss = r.at("eval_loss").get<double>();
  }
  EXPECT_NEAR(loss, masked_loss(*loaded.model, train), 1e-5);
  EXPECT_NEAR(eval_loss, masked_loss(*loaded.model, val), 1e-5);
  expect_events_hold(root_ / "run" / "runs", rows);

  // --train_on all trains every token after the first: another loss.
  TrainArgs all = a;
  all.output_dir = (root_ / "all").string();
  all.train_on = "all";
  ASSERT_EQ(run_train(all, out, err), 0) << err.str();
  double all_loss = NAN;
  for (const nlohmann::json& r : metrics(all.output_dir))
    if (r.contains("loss")) all_loss = r.at("loss").get<double>();
  EXPECT_GT(std::fabs(all_loss - loss), 1e-3);
}

// --eval_data validates on its own examples while every example of --data trains; with text
// data it is refused by name; --validation_split_percentage is --val_fraction in percent.
TEST_F(TrainSft, EvalDataIsTheValidationSplit) {
  TrainArgs a = args(records("messages.jsonl"), "eval-data");
  a.model = folder();
  a.seq_len = 256;
  a.per_device_train_batch_size = 2;
  a.per_device_eval_batch_size = 1;
  a.eval_data = records("sharegpt.jsonl");
  a.max_steps = 1;
  a.eval_steps = 1;
  a.save_strategy = "no";
  std::ostringstream out, err;
  ASSERT_EQ(run_train(a, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("8 examples (4 messages, 4 sharegpt; 4 train, 4 validation"),
            std::string::npos)
      << out.str();
  double eval_loss = NAN;
  for (const nlohmann::json& r : metrics(a.output_dir))
    if (r.contains("eval_loss")) eval_loss = r.at("eval_loss").get<double>();
  EXPECT_TRUE(std::isfinite(eval_loss));
  // A second run reads the encodings from the cache beside the data and trains alike.
  EXPECT_NE(out.str().find("encodings cached in"), std::string::npos) << out.str();
  TrainArgs again = a;
  again.output_dir = (root_ / "eval-data-again").string();
  std::ostringstream out2;
  ASSERT_EQ(run_train(again, out2, err), 0) << err.str();
  EXPECT_NE(out2.str().find("encodings read from"), std::string::npos) << out2.str();
  for (const nlohmann::json& r : metrics(again.output_dir))
    if (r.contains("eval_loss")) {
      EXPECT_EQ(r.at("eval_loss").get<double>(), eval_loss);
    }

  TrainArgs text = args(write_file("t.txt", std::string(4000, 'a')), "text");
  text.eval_data = a.eval_data;
  fitgrad::testing::expect_error([&] { run_train(text, out, err); }, "[train] --eval_data",
                                 "goes with instruction data");

  const auto parsed = [](std::vector<std::string> argv) {
    CLI::App app;
    TrainArgs t;
    add_train_options(app, t);
    std::reverse(argv.begin(), argv.end());  // CLI11 takes the arguments last first
    app.parse(argv);
    return t;
  };
  std::vector<std::string> argv = {
      "--data", "d", "--output_dir", "o", "--validation_split_percentage", "12.5"};
  EXPECT_DOUBLE_EQ(parsed(argv).val_fraction, 0.125);
  argv.insert(argv.end(), {"--val_fraction", "0.1"});
  EXPECT_THROW(parsed(argv), CLI::ExcludesError);
}

// --eval_prompts: at each evaluation the model completes each prompt (a conversation through the
// chat template, or a raw prompt) into metrics.jsonl and eval_samples.jsonl, as `generate`
// completes it greedily from the checkpoint of that step; a bad line is named.
TEST_F(TrainSft, EvalPromptsAreCompletedAtEachEvaluation) {
  TrainArgs a = args(records("messages.jsonl"), "prompts");
  a.model = folder();
  a.seq_len = 256;
  a.per_device_train_batch_size = 1;
  a.per_device_eval_batch_size = 1;
  a.max_steps = 2;
  a.eval_steps = 2;
  a.save_steps = 2;
  a.eval_max_new_tokens = 5;
  a.eval_prompts = write_file("prompts.jsonl", R"([{"role": "user", "content": "Name a colour."}])"
                                               "\n\n"
                                               R"({"prompt": "Once upon a time"})"
                                               "\n");
  std::ostringstream out, err;
  ASSERT_EQ(run_train(a, out, err), 0) << err.str();
  std::vector<nlohmann::json> lines;
  std::ifstream file(fs::path(a.output_dir) / "eval_samples.jsonl");
  for (std::string line; std::getline(file, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].at("step"), 2);
  EXPECT_EQ(lines[0].at("prompt").get<std::string>().rfind("<|im_start|>", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].at("prompt"), "Once upon a time");
  bool in_metrics = false;
  for (const nlohmann::json& r : metrics(a.output_dir))
    if (r.contains("eval_samples")) in_metrics = r.at("eval_samples").size() == 2;
  EXPECT_TRUE(in_metrics);

  const LoadedModel loaded = load_model((fs::path(a.output_dir) / "checkpoint-2").string(), "", {});
  for (const nlohmann::json& line : lines) {
    train::DecodeOptions o;  // greedy, as Note [Prompts at evaluation] says
    o.max_new_tokens = 5;
    o.sampling.temperature = 0;
    std::ostringstream sink;
    std::string want;
    const std::string prompt = line.at("prompt");
    generate_after(loaded, o, loaded.tokenizer->encode(prompt, true), sink, &want);
    EXPECT_EQ(line.at("completion"), want);
  }

  a.output_dir = (root_ / "bad-prompts").string();
  a.eval_prompts = write_file("bad.jsonl", "{\"prompt\": 3}\n");
  fitgrad::testing::expect_error([&] { run_train(a, out, err); }, "[train] --eval_prompts",
                                 "bad.jsonl line 1");
}

// --skip_bad_examples counts the bad records of --data and --eval_data together and names the
// first five of them.
TEST_F(TrainSft, SkippedRecordsOfBothFilesAreCountedAndTheFirstFiveNamed) {
  std::string good, bad;
  for (int i = 0; i < 4; ++i)
    good += R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", )"
            R"("content": "hello there"}]})"
            "\n";
  for (int i = 0; i < 4; ++i) bad += "{\"messages\": 3}\n";
  TrainArgs a = args(write_file("train.jsonl", good + bad), "skipped");
  a.model = folder();
  a.seq_len = 64;
  a.per_device_train_batch_size = 1;
  a.per_device_eval_batch_size = 1;
  a.eval_data = write_file("val.jsonl", bad + good);
  a.skip_bad_examples = true;
  a.max_steps = 1;
  a.save_strategy = "no";
  std::ostringstream out, err;
  ASSERT_EQ(run_train(a, out, err), 0) << err.str();
  const std::string e = err.str();
  const size_t at = e.find("--skip_bad_examples skipped 8 records, the first: ");
  ASSERT_NE(at, std::string::npos) << e;
  const std::string line = e.substr(at, e.find('\n', at) - at);
  size_t named = 0;
  for (size_t p = line.find("[sft "); p != std::string::npos; p = line.find("[sft ", p + 1))
    ++named;
  EXPECT_EQ(named, 5u) << line;
}

// A record the chat template refuses (raise_exception, as transformers' templates refuse roles
// that do not alternate) is a bad record: it stops the run naming it and the way on, and
// --skip_bad_examples counts it and trains on the others (issue 58).
TEST_F(TrainSft, RecordsTheTemplateRefusesAreBadRecords) {
  std::string records;
  for (const char* content : {"hi", "refuse me", "hello"})
    records += std::string(R"({"messages": [{"role": "user", "content": ")") + content +
               R"("}, {"role": "assistant", "content": "hello there"}]})"
               "\n";
  TrainArgs a = args(write_file("train.jsonl", records), "refused");
  a.model = folder();
  a.chat_template =
      write_file("refusing.jinja",
                 "{% for m in messages %}{% if m.content == 'refuse me' %}"
                 "{{ raise_exception('no refusals here') }}{% endif %}"
                 "{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}");
  a.seq_len = 64;
  a.per_device_train_batch_size = 1;
  a.max_steps = 1;
  a.save_strategy = "no";
  std::ostringstream out, err;
  try {
    run_train(a, out, err);
    ADD_FAILURE() << "a record the template refuses trained";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("train.jsonl line 2] rendering"), std::string::npos) << what;
    EXPECT_NE(what.find("no refusals here; fix the record, or pass --skip_bad_examples"),
              std::string::npos)
        << what;
  }
  a.skip_bad_examples = true;
  a.output_dir = (root_ / "refused-skipped").string();
  ASSERT_EQ(run_train(a, out, err), 0) << err.str();
  EXPECT_NE(err.str().find("--skip_bad_examples skipped 1 records, the first: [sft "),
            std::string::npos)
      << err.str();
  EXPECT_NE(out.str().find("-> 2 examples"), std::string::npos) << out.str();
}

// A record that is not what its file's format says stops the run naming the file, the line
// and the field; an example whose trained part lies beyond --seq_len is left out and named.
TEST_F(TrainSft, BadRecordsAndEmptyExamplesAreNamed) {
  const std::string model = folder();
  const std::string bad = write_file(
      "bad.jsonl",
      "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
      "\"content\": \"Hello.\"}]}\n{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}\n");
  TrainArgs a = args(bad, "bad");
  a.model = model;
  std::ostringstream out, err;
  fitgrad::testing::expect_error([&] { run_train(a, out, err); }, "[sft " + bad + " line 2]",
                                 "field 'messages[0].role': unknown role 'robot'");

  std::string text = "{\"messages\": [{\"role\": \"user\", \"content\": \"" +
                     std::string(3000, 'a') +
                     "\"}, {\"role\": \"assistant\", \"content\": \"Late.\"}]}\n";
  for (int i = 0; i < 4; ++i)
    text +=
        "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
        "\"content\": \"Hello.\"}]}\n";
  TrainArgs b = args(write_file("long.jsonl", text), "long");
  b.model = model;
  b.seq_len = 128;
  b.per_device_train_batch_size = 2;
  b.per_device_eval_batch_size = 1;
  b.val_fraction = 0.2;
  b.max_steps = 1;
  std::ostringstream out2, err2;
  ASSERT_EQ(run_train(b, out2, err2), 0) << err2.str();
  EXPECT_NE(err2.str().find("1 examples have no trained token within --seq_len 128 and are left "
                            "out: " +
                            (root_ / "long.jsonl").string() + " line 1"),
            std::string::npos)
      << err2.str();
}

// A dry run on meta sizes itself from the examples and allocates as the real run does, the
// step taking its micro-batches first (Note [Loss over trained targets]), packed rows' positions
// and segments included.
TEST_F(TrainSft, MetaAllocatesAsTheRealRun) {
  const std::string model = folder();
  for (const char* packing : {"bfd", "wrapped", "none"}) {
    SCOPED_TRACE(packing);
    TrainArgs a = args(records("sharegpt.jsonl"), "cpu");
    a.model = model;
    a.output_dir = (root_ / packing).string();
    a.packing = packing;
    a.seq_len = 128;
    a.per_device_train_batch_size = 1;
    a.gradient_accumulation_steps = 2;
    a.per_device_eval_batch_size = 1;
    a.val_fraction = 0.25;
    a.max_steps = 2;
    a.save_strategy = "no";
    ASSERT_EQ(allocator_for(Device::cpu()).stats().allocated_bytes[kAllPools].current, 0);
    TrainArgs meta = a;
    meta.output_dir = (root_ / (std::string(packing) + "-meta")).string();
    meta.device = "meta";
    std::ostringstream out, err, meta_out, meta_err;
    ASSERT_EQ(run_train(a, out, err), 0) << err.str();
    ASSERT_EQ(run_train(meta, meta_out, meta_err), 0) << meta_err.str();
    EXPECT_NE(out.str().find(std::string("packing: ") + packing + ":"), std::string::npos)
        << out.str();
    expect_dry_run_is_the_run(a.output_dir, meta.output_dir);
  }
}

// --group_by_length: the first batch holds the epoch's longest example and its loss is the
// mean over its examples' trained targets, the batch cut to that example's length; the dry run
// allocates as the real run, batch lengths included; packed rows and text are refused.
TEST_F(TrainSft, GroupedBatchesAreCutToTheirLongestExample) {
  const std::string model = folder();
  const std::string data = records("messages.jsonl");
  TrainArgs a = args(data, "grouped");
  a.model = model;
  a.seq_len = 256;
  a.packing = "none";
  a.group_by_length = true;
  a.per_device_train_batch_size = 2;
  a.per_device_eval_batch_size = 1;
  a.val_fraction = 0.25;
  a.learning_rate = 1e-12;
  a.max_steps = 1;
  a.save_steps = 0;
  std::ostringstream out, err;
  {  // The dry run allocates as the run, the batches' cut lengths included.
    TrainArgs real = a, meta = a;
    real.output_dir = (root_ / "grouped-cpu").string();
    real.save_strategy = "no";
    meta.output_dir = (root_ / "grouped-meta").string();
    meta.save_strategy = "no";
    meta.device = "meta";
    ASSERT_EQ(run_train(real, out, err), 0) << err.str();
    ASSERT_EQ(run_train(meta, out, err), 0) << err.str();
    expect_dry_run_is_the_run(real.output_dir, meta.output_dir);
  }
  ASSERT_EQ(run_train(a, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("batches cut to their longest example, grouped by length: the first "
                           "epoch computes"),
            std::string::npos)
      << out.str();

  const LoadedModel loaded = load_model((root_ / "grouped" / "checkpoint-1").string(), "", {});
  const std::vector<data::SftTokens> encoded = encode_records(loaded, model, data);
  const std::vector<data::SftTokens> train(encoded.begin(), encoded.begin() + 3);
  std::vector<int32_t> lengths;
  for (const data::SftTokens& e : train) {
    lengths.push_back(int32_t(e.ids.size()));
    ASSERT_LT(lengths.back(), a.seq_len);
  }
  const std::vector<int64_t> order = data::length_grouped_order(
      data::window_order(3, data::DataOrder::random, a.seed, 0), lengths, 2);
  EXPECT_EQ(lengths[size_t(order[0])], *std::max_element(lengths.begin(), lengths.end()));
  double loss = NAN;
  for (const nlohmann::json& r : metrics(a.output_dir))
    if (r.contains("loss")) loss = r.at("loss").get<double>();
  EXPECT_NEAR(loss, masked_loss(*loaded.model, {train[size_t(order[0])], train[size_t(order[1])]}),
              1e-5);

  TrainArgs packed = a;
  packed.output_dir = (root_ / "grouped-packed").string();
  packed.save_strategy = "no";
  packed.packing = "bfd";
  try {
    run_train(packed, out, err);
    ADD_FAILURE() << "--group_by_length with --packing bfd ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("add --packing none"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fitgrad::apps::test_train
