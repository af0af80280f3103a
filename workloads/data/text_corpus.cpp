// Text corpora -> cached train / held-out token files (text_corpus.h).
#include "workloads/data/text_corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/core/check.h"
#include "workloads/data/token_file.h"
#include "workloads/data/tokenizer.h"

namespace sb::data {
namespace fs = std::filesystem;
namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  SB_REQUIRE(f.good(), "cannot open '{}'", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// FNV-1a, 64 bits: a content key for the cache, not a security hash.
struct Hash {
  std::uint64_t h = 1469598103934665603ULL;
  void add(const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
    const std::uint64_t n = s.size();  // lengths too: ("ab","c") != ("a","bc")
    for (int i = 0; i < 8; ++i) h = (h ^ ((n >> (8 * i)) & 0xff)) * 1099511628211ULL;
  }
};

std::vector<std::string> source_files(const std::string& source) {
  SB_REQUIRE(fs::exists(source), "text dataset '{}' does not exist (data = a .txt file or a "
                                 "folder of .txt files)", source);
  if (!fs::is_directory(source)) return {source};
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(source))
    if (e.is_regular_file() && e.path().extension() == ".txt") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  SB_REQUIRE(!files.empty(), "text folder '{}' holds no .txt files", source);
  return files;
}

// The vocabulary files a tokenizer reads (their bytes enter the cache key).
std::vector<std::string> tokenizer_files(const TextCorpusConfig& c) {
  std::vector<std::string> out;
  for (const char* f : {"vocab.json", "merges.txt", "encoder.json", "vocab.bpe", "vocab.txt"}) {
    const std::string p = c.tokenizer_dir + "/" + f;
    if (!c.tokenizer_dir.empty() && fs::exists(p)) out.push_back(p);
  }
  return out;
}

// A single file's documents: paragraphs, split at lines that are empty or only whitespace.
std::vector<std::string> paragraphs(const std::string& text) {
  std::vector<std::string> out;
  std::string cur, line;
  std::istringstream in(text);
  auto flush = [&] {
    if (cur.find_first_not_of(" \t\r\n") != std::string::npos) out.push_back(cur);
    cur.clear();
  };
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) flush();
    else cur += line + "\n";
  }
  flush();
  return out;
}

}  // namespace

bool is_text_path(const std::string& path) {
  if (path == "markov") return false;  // the synthetic data's name, even beside a folder of it
  return (path.size() > 4 && path.compare(path.size() - 4, 4, ".txt") == 0) ||
         (!path.empty() && fs::is_directory(path));
}

TextCorpus prepare_text_corpus(const TextCorpusConfig& c) {
  const auto files = source_files(c.source);
  Hash h;
  h.add("shardbench text corpus v1");
  h.add(c.tokenizer);
  h.add(fmt::format("{} {}", c.heldout_fraction, c.seed));
  std::vector<std::string> texts;
  for (const auto& f : files) {
    texts.push_back(read_utf8_file(f));
    h.add(fs::path(f).filename().string());
    h.add(texts.back());
  }
  for (const auto& f : tokenizer_files(c)) h.add(slurp(f));
  TextCorpus out;
  out.key = fmt::format("{:016x}", h.h);
  const std::string base = c.cache_dir + "/" + out.key;
  out.train_bin = base + ".train.bin", out.heldout_bin = base + ".heldout.bin";
  out.manifest = base + ".json";
  if (fs::exists(out.manifest)) {  // written last: the streams beside it are complete
    const auto m = nlohmann::json::parse(slurp(out.manifest));
    out.reused = true;
    out.documents = m.at("documents"), out.heldout_documents = m.at("heldout_documents");
    out.train_tokens = m.at("train_tokens"), out.heldout_tokens = m.at("heldout_tokens");
    return out;
  }
  std::vector<std::string> docs;
  for (auto& t : texts) {
    if (files.size() > 1) {
      if (t.find_first_not_of(" \t\r\n") != std::string::npos) docs.push_back(std::move(t));
    } else {
      docs = paragraphs(t);
    }
  }
  SB_REQUIRE(docs.size() >= 2, "text dataset '{}' has {} document(s); a held-out split by document "
                               "needs at least 2 (files of a folder, or paragraphs of a file "
                               "separated by blank lines)", c.source, docs.size());
  // Held out by document: a seeded shuffle, the first fraction (at least one document).
  std::vector<std::size_t> order(docs.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(c.seed * 0x9E3779B97F4A7C15ULL + 29);
  std::shuffle(order.begin(), order.end(), rng);
  const auto nh = std::clamp<std::size_t>(
      static_cast<std::size_t>(c.heldout_fraction * static_cast<double>(docs.size()) + 0.5), 1,
      docs.size() - 1);
  std::vector<bool> held(docs.size(), false);
  for (std::size_t i = 0; i < nh; ++i) held[order[i]] = true;
  const auto tok = make_tokenizer(c.tokenizer, c.tokenizer_dir);
  SB_REQUIRE(tok->vocab_size() <= 65536, "tokenizer {} has {} tokens; token files hold uint16 ids "
                                         "(at most 65536)", c.tokenizer, tok->vocab_size());
  std::vector<std::int32_t> train, heldout;
  for (std::size_t i = 0; i < docs.size(); ++i) {  // document order kept within each stream
    const auto ids = tok->encode(docs[i]);
    auto& dst = held[i] ? heldout : train;
    dst.insert(dst.end(), ids.begin(), ids.end());
  }
  std::error_code ec;
  fs::create_directories(c.cache_dir, ec);
  SB_CHECK(!ec, "cannot create the token cache '{}': {}", c.cache_dir, ec.message());
  write_token_file(out.train_bin, train);
  write_token_file(out.heldout_bin, heldout);
  out.documents = static_cast<std::int64_t>(docs.size());
  out.heldout_documents = static_cast<std::int64_t>(nh);
  out.train_tokens = static_cast<std::int64_t>(train.size());
  out.heldout_tokens = static_cast<std::int64_t>(heldout.size());
  nlohmann::json m = {{"source", c.source},     {"files", files},
                      {"tokenizer", c.tokenizer}, {"tokenizer_files", tokenizer_files(c)},
                      {"heldout_fraction", c.heldout_fraction}, {"seed", c.seed},
                      {"documents", out.documents}, {"heldout_documents", out.heldout_documents},
                      {"train_tokens", out.train_tokens}, {"heldout_tokens", out.heldout_tokens}};
  const std::string tmp = out.manifest + ".tmp";
  {
    std::ofstream f(tmp);
    f << m.dump(2) << "\n";
    SB_CHECK(f.good(), "writing '{}' failed (disk full?)", tmp);
  }
  SB_CHECK(std::rename(tmp.c_str(), out.manifest.c_str()) == 0, "cannot rename '{}' to '{}'", tmp,
           out.manifest);
  return out;
}

}  // namespace sb::data
