// Tokenizer speed on English text, one thread, against reading the same bytes (the Realdata
// issue: GPT-2 BPE >= 1 M tokens/s per core, WordPiece at least as fast), printed, never
// asserted. Nothing is downloaded, so the vocabularies are learned here from the text itself:
// a byte-level BPE with --merges merges (GPT-2 has 50,000) trained on its first MB, and a
// WordPiece vocabulary of its most frequent lower-cased words plus every character alone and
// as a "##" continuation. Text: --text FILE, else the system's licence texts
// (/usr/share/common-licenses, /usr/share/doc/*/copyright), valid UTF-8 files only, up to
// --mb megabytes. Rounds interleave reading the bytes, BPE and WordPiece.
//   build/micro/micro_bench_tokenize [--text FILE] [--mb 8] [--merges 5000] [--rounds 3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/micro/bench_util.h"
#include "workloads/data/token_file.h"
#include "workloads/data/tokenizer.h"

namespace fs = std::filesystem;

namespace {

using sb::bench::arg;
using sb::bench::now_s;

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string corpus(const std::string& given, std::size_t max_bytes) {
  if (!given.empty()) return slurp(given).substr(0, max_bytes);
  std::vector<std::string> files;
  for (const char* d : {"/usr/share/common-licenses", "/usr/share/doc"})
    if (fs::exists(d))
      for (const auto& e : fs::recursive_directory_iterator(d, fs::directory_options::skip_permission_denied))
        if (e.is_regular_file() && (std::string(d) == "/usr/share/common-licenses" ||
                                    e.path().filename() == "copyright"))
          files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& f : files) {
    std::string t = slurp(f);
    if (sb::data::first_invalid_utf8(t) >= 0) continue;
    text += t + "\n\n";
    if (text.size() >= max_bytes) break;
  }
  return text.substr(0, max_bytes);
}

std::string utf8(std::uint32_t cp) {
  std::string s;
  if (cp < 0x80) s += static_cast<char>(cp);
  else s += static_cast<char>(0xc0 | (cp >> 6)), s += static_cast<char>(0x80 | (cp & 0x3f));
  return s;  // byte symbols are below U+0800
}

// GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to 256 + n.
std::vector<std::string> byte_symbols() {
  std::vector<std::string> out(256);
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    out[b] = utf8(printable ? static_cast<std::uint32_t>(b) : 256u + static_cast<std::uint32_t>(n++));
  }
  return out;
}

// Byte-level BPE training: the most frequent adjacent pair of the pre-tokenized words merged,
// `merges` times. Writes vocab.json and merges.txt (Hugging Face layout) into dir.
void train_bpe(const std::string& text, int merges, const std::string& dir) {
  const auto sym = byte_symbols();
  std::vector<std::string> names(sym.begin(), sym.end());
  std::map<std::string, std::int64_t> counts;
  for (const auto& piece : sb::data::gpt2_pretokenize(text)) ++counts[piece];
  std::vector<std::vector<int>> words;
  std::vector<std::int64_t> freq;
  for (const auto& [w, c] : counts) {
    std::vector<int> ids;
    for (unsigned char b : w) ids.push_back(b);
    words.push_back(std::move(ids));
    freq.push_back(c);
  }
  std::vector<std::string> merge_lines;
  for (int k = 0; k < merges; ++k) {
    std::unordered_map<std::uint64_t, std::int64_t> pairs;
    for (std::size_t w = 0; w < words.size(); ++w)
      for (std::size_t i = 0; i + 1 < words[w].size(); ++i)
        pairs[(std::uint64_t(words[w][i]) << 32) | std::uint32_t(words[w][i + 1])] += freq[w];
    std::uint64_t best = 0;
    std::int64_t best_n = 0;
    for (const auto& [p, n] : pairs)
      if (n > best_n || (n == best_n && p < best)) best = p, best_n = n;
    if (best_n < 2) break;
    const int a = static_cast<int>(best >> 32), b = static_cast<int>(best & 0xffffffffu);
    const int id = static_cast<int>(names.size());
    names.push_back(names[a] + names[b]);
    merge_lines.push_back(names[a] + " " + names[b]);
    for (auto& w : words) {
      std::vector<int> out;
      for (std::size_t i = 0; i < w.size(); ++i) {
        if (i + 1 < w.size() && w[i] == a && w[i + 1] == b) out.push_back(id), ++i;
        else out.push_back(w[i]);
      }
      w.swap(out);
    }
  }
  nlohmann::json vocab;
  for (std::size_t i = 0; i < names.size(); ++i) vocab[names[i]] = i;
  std::ofstream(dir + "/vocab.json") << vocab.dump();
  std::ofstream m(dir + "/merges.txt");
  m << "#version: 0.2\n";
  for (const auto& l : merge_lines) m << l << "\n";
}

// WordPiece vocabulary: specials, every character alone and with "##", the most frequent
// lower-cased words (split at non-letters and non-digits, as the basic tokenizer does).
void make_wordpiece_vocab(const std::string& text, std::size_t words, const std::string& dir) {
  std::map<std::string, std::int64_t> counts;
  std::vector<std::string> chars;
  std::string w;
  auto flush = [&] {
    if (!w.empty()) ++counts[w];
    w.clear();
  };
  for (unsigned char c : text) {
    if (std::isalnum(c)) {
      w += static_cast<char>(std::tolower(c));
    } else {
      flush();
      if (c >= 33 && c < 127) chars.push_back(std::string(1, static_cast<char>(c)));
    }
  }
  flush();
  std::vector<std::pair<std::int64_t, std::string>> by_count;
  for (const auto& [k, n] : counts) by_count.push_back({-n, k});
  std::sort(by_count.begin(), by_count.end());
  std::ofstream f(dir + "/vocab.txt");
  for (const char* s : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) f << s << "\n";
  for (int c = 33; c < 127; ++c) f << static_cast<char>(c) << "\n" << "##" << static_cast<char>(c) << "\n";
  for (std::size_t i = 0; i < by_count.size() && i < words; ++i)
    if (by_count[i].second.size() > 1) f << by_count[i].second << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t mb = std::strtoul(arg(argc, argv, "--mb", "8").c_str(), nullptr, 10);
  const int merges = std::atoi(arg(argc, argv, "--merges", "5000").c_str());
  const int rounds = std::atoi(arg(argc, argv, "--rounds", "3").c_str());
  const std::string text = corpus(arg(argc, argv, "--text", ""), mb << 20);
  if (text.size() < (1u << 20)) {
    std::fprintf(stderr, "bench_tokenize: only %zu bytes of UTF-8 text found; pass --text FILE\n", text.size());
    return 1;
  }
  const std::string dir = (fs::temp_directory_path() / "sb_bench_tokenize").string();
  fs::create_directories(dir);
  const std::string file = dir + "/text.txt";
  std::ofstream(file, std::ios::binary) << text;
  double t0 = now_s();
  train_bpe(text.substr(0, 1u << 20), merges, dir);
  make_wordpiece_vocab(text, 30000, dir);
  const double train_s = now_s() - t0;
  auto bpe = sb::data::make_tokenizer("gpt2-bpe", dir);
  auto wp = sb::data::make_tokenizer("bert-wordpiece", dir);
  std::printf("# %.1f MB of English text (%s), one thread; vocabularies learned from it in %.1f s:"
              " BPE %lld symbols, WordPiece %lld tokens\n", text.size() / 1e6,
              arg(argc, argv, "--text", "").empty() ? "licence texts" : "--text",
              train_s, static_cast<long long>(bpe->vocab_size()),
              static_cast<long long>(wp->vocab_size()));
  std::vector<double> read_s, bpe_s, wp_s;
  std::size_t bpe_n = 0, wp_n = 0;
  for (int r = 0; r < rounds; ++r) {
    t0 = now_s();
    const std::string again = slurp(file);  // the baseline: the bytes from the page cache
    read_s.push_back(now_s() - t0);
    t0 = now_s();
    bpe_n = bpe->encode(again).size();
    bpe_s.push_back(now_s() - t0);
    t0 = now_s();
    wp_n = wp->encode(again).size();
    wp_s.push_back(now_s() - t0);
  }
  auto best = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
  const double mbs = text.size() / 1e6;
  std::printf("read the bytes   %8.3f s  %9.1f MB/s\n", best(read_s), mbs / best(read_s));
  std::printf("gpt2-bpe         %8.3f s  %9.1f MB/s  %10.0f tokens/s  (%zu tokens)\n", best(bpe_s),
              mbs / best(bpe_s), bpe_n / best(bpe_s), bpe_n);
  std::printf("bert-wordpiece   %8.3f s  %9.1f MB/s  %10.0f tokens/s  (%zu tokens)\n", best(wp_s),
              mbs / best(wp_s), wp_n / best(wp_s), wp_n);
  const double bpe_rate = bpe_n / best(bpe_s), wp_rate = wp_n / best(wp_s);
  std::printf("# target gpt2-bpe >= 1e6 tokens/s per core: %s; WordPiece >= BPE's rate: %s\n",
              bpe_rate >= 1e6 ? "PASS" : "MISS", wp_rate >= bpe_rate ? "PASS" : "MISS");
  return 0;
}
