// is_sft_data and load_sft_data (train_sft.h).
#include "apps/train/train_sft.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "apps/chat_prompt.h"
#include "data/folder_files.h"
#include "data/hf_tokenizer.h"
#include "data/sft_records.h"
#include "tensor/error.h"

namespace fitgrad::apps {

namespace fs = std::filesystem;

bool is_sft_data(const TrainArgs& a) {
  if (a.dataset_format != "auto") return true;
  const auto records = [](const std::string& name) {
    return name.ends_with(".jsonl") || name.ends_with(".json");
  };
  std::error_code ec;
  if (!fs::is_directory(a.data, ec)) return records(a.data);
  const std::string where = "[data " + a.data + "]";
  return !data::folder_files(a.data, records, where).empty() &&
         data::folder_files(
             a.data, [](const std::string& n) { return n.ends_with(".txt"); }, where)
             .empty();
}

// Note [Instruction data in a run]
// The records are read whole (a malformed one is an error naming its file, line and field, or
// with --skip_bad_examples counted), the last ceil(--val_fraction x n) of them (in file order,
// as the text split takes the stream's tail) are the validation split, or with --eval_data
// that data's records are and all of --data trains, and each is encoded as
// data/sft_encode.h says: conversations through the chat template (the model's, or
// --chat_template's), the loss on --train_on's part; plain text and plain prompts start with
// the bos when the tokenizer adds one to a text (data::vocabulary_adds_bos). Each example takes
// a layout of data/sft_stream.h, --packing's (auto: bfd, or none when every record is plain
// text, as TRL packs conversational and prompt/completion data), padded with the tokenizer's
// pad (else its eos, else 0), the padding no target; an example with no target left is
// dropped and reported. The loss is the mean over the trained targets of the whole accumulated
// batch (Note [Loss over trained targets] in train/train_step.cpp). The examples are encoded at
// the start of each run, in memory; the token cache holds text only.
SftData load_sft_data(const TrainArgs& a, const LoadedModel& lm, std::ostream& err) {
  FG_CHECK(lm.tokenizer, "[train] instruction data needs a tokenizer; {} has none", a.model);
  data::SftReadOptions ro;
  ro.format = data::parse_sft_format(a.dataset_format);
  ro.text_field = a.dataset_text_field;
  ro.skip_bad_examples = a.skip_bad_examples;
  data::SftReadReport report;
  std::vector<data::SftExample> examples = data::read_sft_examples(a.data, ro, &report);
  // With --eval_data every example of --data trains and the validation split is that data's.
  const auto n_data = int64_t(examples.size());
  if (!a.eval_data.empty()) {
    data::SftReadReport eval_report;
    std::vector<data::SftExample> val = data::read_sft_examples(a.eval_data, ro, &eval_report);
    FG_CHECK(!val.empty(), "[train] --eval_data {} holds no example", a.eval_data);
    report.skipped += eval_report.skipped;
    report.first_errors.insert(report.first_errors.end(), eval_report.first_errors.begin(),
                               eval_report.first_errors.end());
    examples.insert(examples.end(), std::make_move_iterator(val.begin()),
                    std::make_move_iterator(val.end()));
  }
  std::map<std::string, int64_t> formats;
  bool conversational = false, all_text = true;
  for (const data::SftExample& e : examples) {
    ++formats[std::string(data::sft_format_name(e.format))];
    conversational |= e.conversational();
    all_text &= e.format == data::SftFormat::text;
  }
  std::optional<data::ChatTemplate> chat;
  if (conversational) chat = model_chat_template(lm, a.chat_template, a.model, "train");
  data::SftEncodeOptions eo;
  eo.train_on = data::parse_train_on(a.train_on);
  eo.add_bos = data::vocabulary_adds_bos(lm.tokenizer_vocabulary);
  const data::SftEncoder encoder(*lm.tokenizer, chat ? &*chat : nullptr, a.model, eo);
  const data::Tokenizer& tok = *lm.tokenizer;
  const int32_t pad = tok.pad() ? *tok.pad() : tok.eos() ? *tok.eos() : 0;

  const auto n = int64_t(examples.size());
  const int64_t n_val = !a.eval_data.empty() ? n - n_data
                        : a.val_fraction > 0
                            ? std::min<int64_t>(n, int64_t(std::ceil(a.val_fraction * double(n))))
                            : 0;
  SftData d;
  d.packing = a.packing != "auto" ? data::parse_packing(a.packing)
              : all_text && n > 0 ? data::Packing::none
                                  : data::Packing::bfd;
  std::vector<data::SftTokens> train, val;
  for (int64_t i = 0; i < n; ++i)
    (i < n - n_val ? train : val).push_back(encoder.encode(examples[size_t(i)]));
  d.train = data::layout_examples(train, a.seq_len, pad, d.packing);
  d.val = data::layout_examples(val, a.seq_len, pad, d.packing);
  std::vector<std::string> dropped;
  for (const size_t i : d.train.dropped) dropped.push_back(examples[i].where);
  for (const size_t i : d.val.dropped) dropped.push_back(examples[train.size() + i].where);
  if (!dropped.empty())
    err << fmt::format(
        "warning: {} examples have no trained token within --seq_len {} and are left out: {}{}\n",
        dropped.size(), a.seq_len,
        fmt::join(dropped.begin(),
                  dropped.begin() + std::ptrdiff_t(std::min<size_t>(5, dropped.size())), "; "),
        dropped.size() > 5 ? "; ..." : "");
  if (report.skipped > 0)
    err << fmt::format("warning: --skip_bad_examples skipped {} records, the first: {}\n",
                       report.skipped, fmt::join(report.first_errors, "; "));
  std::string kinds;
  for (const auto& [format, count] : formats)
    kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", count, format);
  const auto share = [](const data::SftStream& s) {
    return s.real_tokens > 0 ? 100.0 * double(s.trained_tokens) / double(s.real_tokens) : 0.0;
  };
  // The packing efficiency: of the tokens a step computes (rows x --seq_len), the share
  // that are the examples' and the share the loss learns.
  const auto computed = double(std::max<int64_t>(1, d.train.rows * a.seq_len));
  d.summary = fmt::format(
      "data: {} -> {} examples ({}; {} train, {} validation; {} cut to --seq_len {}, {} left "
      "without a target), {} tokens of which {} trained ({:.1f}%), --train_on {}{}, tokenizer {}\n"
      "packing: {}: {} training examples in {} rows of {}; of the computed tokens {:.1f}% are "
      "the examples' and {:.1f}% trained",
      a.data, n, kinds, d.train.examples, d.val.examples, d.train.truncated + d.val.truncated,
      a.seq_len, dropped.size(), d.train.real_tokens + d.val.real_tokens,
      d.train.trained_tokens + d.val.trained_tokens, share(d.train), a.train_on,
      chat ? fmt::format(", chat template of {}",
                         a.chat_template.empty() ? a.model : a.chat_template)
           : std::string(),
      lm.tokenizer_id, data::packing_name(d.packing), d.train.examples, d.train.rows, a.seq_len,
      100.0 * double(d.train.real_tokens) / computed,
      100.0 * double(d.train.trained_tokens) / computed);
  return d;
}

}  // namespace fitgrad::apps
