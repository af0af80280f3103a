// Labelled datasets: JSONL and CSV readers (errors at file:line), label ids, tokenized rows,
// the seeded split, batches and the classification scores.
#include "workloads/data/labelled.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "harness/core/check.h"
#include "workloads/data/jsonl.h"
#include "workloads/data/token_file.h"

namespace sb::data {
namespace {

struct Example {
  std::string text, pair, label;
  std::string where;  // file:line
};

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

std::string read_file(const std::string& path) {
  struct stat st;
  SB_REQUIRE(::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode),
             "labelled dataset '{}' does not exist (data = a .jsonl or .csv file)", path);
  return read_utf8_file(path);
}

// A label as JSON gives it: a string, or an integer written in decimal.
std::string label_text(const nlohmann::json& v, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  SB_USER_FAIL("{}: \"label\" is {}; it must be a string or an integer", where, v.dump());
}

std::vector<Example> read_jsonl(const std::string& path) {
  std::vector<Example> out;
  for_each_jsonl_line(path, read_file(path), [&](const nlohmann::json& j, const std::string& where) {
    SB_REQUIRE(j.is_object(), "{}: a line must be a JSON object with \"text\" and \"label\"", where);
    SB_REQUIRE(j.contains("text") && j["text"].is_string(), "{}: missing string field \"text\"", where);
    SB_REQUIRE(j.contains("label") && !j["label"].is_null(), "{}: missing field \"label\"", where);
    Example e{j["text"].get<std::string>(), "", label_text(j["label"], where), where};
    if (j.contains("text_pair") && !j["text_pair"].is_null()) {
      SB_REQUIRE(j["text_pair"].is_string(), "{}: \"text_pair\" must be a string", where);
      e.pair = j["text_pair"].get<std::string>();
    }
    out.push_back(std::move(e));
  });
  return out;
}

// RFC 4180 records: fields split by commas, "quoted" fields with "" for a quote and line
// breaks inside; each record with the line it starts on.
std::vector<std::pair<int, std::vector<std::string>>> csv_records(const std::string& s,
                                                                  const std::string& path) {
  std::vector<std::pair<int, std::vector<std::string>>> out;
  std::vector<std::string> rec;
  std::string field;
  bool quoted = false, any = false;
  int line = 1, start = 1;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quoted) {
      if (c == '"' && i + 1 < s.size() && s[i + 1] == '"') field += '"', ++i;
      else if (c == '"') quoted = false;
      else field += c, line += c == '\n';
      continue;
    }
    if (c == '"' && field.empty()) quoted = any = true;
    else if (c == ',') rec.push_back(std::move(field)), field.clear(), any = true;
    else if (c == '\r') continue;
    else if (c == '\n') {
      if (any || !field.empty()) {
        rec.push_back(std::move(field));
        out.emplace_back(start, std::move(rec));
      }
      rec.clear(), field.clear(), any = false;
      start = ++line;
    } else {
      field += c, any = true;
    }
  }
  SB_REQUIRE(!quoted, "{}:{}: a quoted field is not closed", path, start);
  if (any || !field.empty()) {
    rec.push_back(std::move(field));
    out.emplace_back(start, std::move(rec));
  }
  return out;
}

std::vector<Example> read_csv(const std::string& path) {
  auto recs = csv_records(read_file(path), path);
  SB_REQUIRE(!recs.empty(), "{}: empty (a CSV dataset needs a header: text,label[,text_pair])", path);
  const auto& header = recs[0].second;
  auto column = [&](const char* name) {
    auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  };
  const int t = column("text"), l = column("label"), p = column("text_pair");
  SB_REQUIRE(t >= 0 && l >= 0, "{}:1: the header must name the columns text and label (and "
                               "optionally text_pair); it has: {}", path, fmt::join(header, ","));
  std::vector<Example> out;
  for (std::size_t r = 1; r < recs.size(); ++r) {
    const auto& [line, f] = recs[r];
    const std::string where = path + ":" + std::to_string(line);
    SB_REQUIRE(f.size() == header.size(), "{}: {} fields, the header has {}", where, f.size(),
               header.size());
    SB_REQUIRE(!f[static_cast<std::size_t>(l)].empty(), "{}: empty label", where);
    out.push_back({f[static_cast<std::size_t>(t)], p >= 0 ? f[static_cast<std::size_t>(p)] : "",
                   f[static_cast<std::size_t>(l)], where});
  }
  return out;
}

std::vector<Example> read_examples(const std::string& path) {
  auto ex = ends_with(path, ".csv") ? read_csv(path) : read_jsonl(path);
  SB_REQUIRE(!ex.empty(), "labelled dataset '{}' has no examples", path);
  return ex;
}

bool is_integer(const std::string& s) {
  if (s.empty() || s.size() > 18) return false;
  std::size_t i = s[0] == '-' ? 1 : 0;
  return i < s.size() && std::all_of(s.begin() + static_cast<long>(i), s.end(),
                                     [](char c) { return c >= '0' && c <= '9'; });
}

// Label ids: ascending integers when every label is one, else sorted strings.
std::vector<std::string> label_order(const std::vector<Example>& train) {
  std::set<std::string> seen;
  for (const auto& e : train) seen.insert(e.label);
  std::vector<std::string> out(seen.begin(), seen.end());
  if (std::all_of(out.begin(), out.end(), is_integer))
    std::sort(out.begin(), out.end(),
              [](const std::string& a, const std::string& b) { return std::stoll(a) < std::stoll(b); });
  return out;
}

struct Special {
  std::int32_t cls, sep, pad;
};

// [CLS] a [SEP] (b [SEP]) into row r of the split's tensors; returns whether it was cut.
bool encode_row(const Example& e, const Tokenizer& tok, const Special& sp, std::int64_t vocab,
                const LabelledConfig& c, LabelledSplit& s, std::int64_t r) {
  auto a = tok.encode(e.text), b = e.pair.empty() ? std::vector<std::int32_t>{} : tok.encode(e.pair);
  const std::int64_t budget = c.seq - (e.pair.empty() ? 2 : 3);
  SB_REQUIRE(budget >= 1, "seq {} leaves no room for text beside [CLS]/[SEP]", c.seq);
  const bool cut = static_cast<std::int64_t>(a.size() + b.size()) > budget;
  SB_REQUIRE(!cut || c.truncate, "{}: {} tokens exceed seq {} (with [CLS]/[SEP]); set truncate = "
                                 "true to cut them or raise seq", e.where, a.size() + b.size() + (e.pair.empty() ? 2 : 3), c.seq);
  while (static_cast<std::int64_t>(a.size() + b.size()) > budget)  // longest first, as HF
    (a.size() >= b.size() ? a : b).pop_back();
  auto all_ids = s.input_ids.accessor<std::int64_t, 2>();
  auto all_types = s.token_type_ids.accessor<std::int64_t, 2>();
  auto all_mask = s.attention_mask.accessor<std::int64_t, 2>();
  auto ids = all_ids[r];
  auto types = all_types[r];
  auto mask = all_mask[r];
  std::int64_t k = 0;
  auto put = [&](std::int32_t id, std::int64_t type) {
    SB_REQUIRE(id >= 0 && id < vocab, "{}: token id {} is outside the model's vocabulary of {} "
                                      "(does the tokenizer's vocab.txt belong to this model?)",
               e.where, id, vocab);
    ids[k] = id, types[k] = type, mask[k] = 1, ++k;
  };
  put(sp.cls, 0);
  for (auto id : a) put(id, 0);
  put(sp.sep, 0);
  if (!e.pair.empty()) {
    for (auto id : b) put(id, 1);
    put(sp.sep, 1);
  }
  for (; k < c.seq; ++k) ids[k] = sp.pad, types[k] = 0, mask[k] = 0;
  return cut;
}

LabelledSplit encode(const std::vector<const Example*>& ex, const std::map<std::string, std::int64_t>& id,
                     const Tokenizer& tok, const Special& sp, std::int64_t vocab,
                     const LabelledConfig& c, std::int64_t& truncated, const char* split) {
  const auto n = static_cast<std::int64_t>(ex.size());
  LabelledSplit s;
  const auto opts = torch::TensorOptions().dtype(torch::kLong);
  s.input_ids = torch::empty({n, c.seq}, opts);
  s.token_type_ids = torch::empty({n, c.seq}, opts);
  s.attention_mask = torch::empty({n, c.seq}, opts);
  s.labels = torch::empty({n}, opts);
  for (std::int64_t r = 0; r < n; ++r) {
    const Example& e = *ex[static_cast<std::size_t>(r)];
    auto it = id.find(e.label);
    SB_REQUIRE(it != id.end(), "{}: {} label \"{}\" never occurs in the training examples (labels: "
                               "{} of them); fix the label or add training examples of it",
               e.where, split, e.label, id.size());
    s.labels[r] = it->second;
    truncated += encode_row(e, tok, sp, vocab, c, s, r);
  }
  return s;
}

}  // namespace

bool is_labelled_path(const std::string& path) {
  return ends_with(path, ".jsonl") || ends_with(path, ".json") || ends_with(path, ".csv");
}

models::Batch LabelledSplit::select(const torch::Tensor& idx) const {
  models::Batch b;
  b.input_ids = input_ids.index_select(0, idx);
  b.token_type_ids = token_type_ids.index_select(0, idx);
  b.attention_mask = attention_mask.index_select(0, idx);
  b.labels = labels.index_select(0, idx);
  return b;
}

models::Batch LabelledSplit::rows(std::int64_t begin, std::int64_t end) const {
  models::Batch b;
  b.input_ids = input_ids.slice(0, begin, end);
  b.token_type_ids = token_type_ids.slice(0, begin, end);
  b.attention_mask = attention_mask.slice(0, begin, end);
  b.labels = labels.slice(0, begin, end);
  return b;
}

LabelledData load_labelled(const LabelledConfig& c, const Tokenizer& tok, std::int64_t vocab) {
  Special sp{tok.token_id("[CLS]"), tok.token_id("[SEP]"), tok.token_id("[PAD]")};
  SB_REQUIRE(sp.cls >= 0 && sp.sep >= 0 && sp.pad >= 0,
             "tokenizer {} has no [CLS], [SEP] or [PAD]: labelled data needs BERT's vocabulary "
             "(tokenizer = \"bert-wordpiece\")", tok.name());
  auto all = read_examples(c.train_path);
  std::vector<const Example*> train, val;
  std::vector<Example> val_file;
  if (!c.validation_path.empty()) {
    val_file = read_examples(c.validation_path);
    for (const auto& e : all) train.push_back(&e);
    for (const auto& e : val_file) val.push_back(&e);
  } else {
    // By example (a document is one example): a seeded shuffle, the first fraction held out.
    std::vector<std::size_t> order(all.size());
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(c.seed * 0x9E3779B97F4A7C15ULL + 17);
    std::shuffle(order.begin(), order.end(), rng);
    const auto nv = static_cast<std::size_t>(c.validation_fraction * static_cast<double>(all.size()));
    SB_REQUIRE(nv >= 1 && nv < all.size(), "{}: {} examples leave no {} for validation at "
                                           "validation_fraction {}; add examples or give a "
                                           "validation file", c.train_path, all.size(),
               nv < 1 ? "example" : "training examples", c.validation_fraction);
    for (std::size_t i = 0; i < order.size(); ++i) (i < nv ? val : train).push_back(&all[order[i]]);
  }
  std::vector<Example> train_copy;  // label order from the training examples only
  for (const auto* e : train) train_copy.push_back(*e);
  LabelledData d;
  d.labels = label_order(train_copy);
  std::map<std::string, std::int64_t> id;
  for (std::size_t i = 0; i < d.labels.size(); ++i) id[d.labels[i]] = static_cast<std::int64_t>(i);
  d.train = encode(train, id, tok, sp, vocab, c, d.truncated, "training");
  d.validation = encode(val, id, tok, sp, vocab, c, d.truncated, "validation");
  return d;
}

LabelledBatches::LabelledBatches(std::shared_ptr<const LabelledData> data, std::int64_t batch,
                                 std::uint64_t seed)
    : data_(std::move(data)), batch_(batch), seed_(seed) {}

Batch LabelledBatches::train(std::int64_t step) const {
  const std::int64_t n = data_->train.size();
  std::vector<std::int64_t> rows;
  std::vector<std::int64_t> perm;
  std::int64_t perm_epoch = -1;
  for (std::int64_t j = 0; j < batch_; ++j) {
    const std::int64_t k = step * batch_ + j, epoch = k / n;
    if (epoch != perm_epoch) {  // the epoch's order depends on (seed, epoch) only
      perm.resize(static_cast<std::size_t>(n));
      std::iota(perm.begin(), perm.end(), 0);
      std::mt19937_64 rng(seed_ * 1000003ULL + static_cast<std::uint64_t>(epoch));
      std::shuffle(perm.begin(), perm.end(), rng);
      perm_epoch = epoch;
    }
    rows.push_back(perm[static_cast<std::size_t>(k % n)]);
  }
  return data_->train.select(torch::tensor(rows, torch::kLong));
}

Batch LabelledBatches::heldout(std::int64_t i) const {
  const std::int64_t n = data_->validation.size();
  return data_->validation.select(torch::arange(i * batch_, (i + 1) * batch_, torch::kLong).remainder(n));
}

torch::Tensor predicted_classes(const LabelledSplit& split, std::int64_t batch,
                                const std::function<torch::Tensor(const models::Batch&)>& classify) {
  std::vector<torch::Tensor> out;
  for (std::int64_t i = 0; i < split.size(); i += batch)
    out.push_back(classify(split.rows(i, std::min(split.size(), i + batch))).argmax(-1).cpu());
  return out.empty() ? torch::zeros({0}, torch::kLong) : torch::cat(out);
}

ClassificationScore classification_score(const torch::Tensor& predicted, const torch::Tensor& truth,
                                         std::int64_t num_labels) {
  SB_CHECK(predicted.sizes() == truth.sizes() && predicted.dim() == 1,
           "classification_score: {} predictions for {} labels", predicted.numel(), truth.numel());
  ClassificationScore s;
  s.examples = truth.numel();
  if (s.examples == 0) return s;
  auto p = predicted.to(torch::kLong), t = truth.to(torch::kLong);
  s.accuracy = (p == t).sum().item<double>() / static_cast<double>(s.examples);
  double f1 = 0;
  int present = 0;
  for (std::int64_t l = 0; l < num_labels; ++l) {
    const double tp = ((p == l) & (t == l)).sum().item<double>();
    const double fp = ((p == l) & (t != l)).sum().item<double>();
    const double fn = ((p != l) & (t == l)).sum().item<double>();
    if (tp + fp + fn == 0) continue;  // neither in the truth nor predicted
    f1 += 2 * tp / (2 * tp + fp + fn);
    ++present;
  }
  s.macro_f1 = present ? f1 / present : 0;
  return s;
}

}  // namespace sb::data
