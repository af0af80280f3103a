// "gpt2-bpe": GPT-2's byte-level BPE (Radford et al. 2019; openai/gpt-2 encoder.py). Text is
// pre-tokenized, each piece's bytes mapped to printable code points (bytes_to_unicode), and
// the lowest-ranked adjacent pair merged until no pair has a rank.
#include <sys/stat.h>

#include <clocale>
#include <cwctype>
#include <fstream>
#include <limits>
#include <map>
#include <unordered_map>

#include <locale.h>
#include <nlohmann/json.hpp>

#include "harness/core/check.h"
#include "workloads/data/tokenizer.h"

namespace sb::data {
namespace {

// ---- UTF-8 ----------------------------------------------------------------------------
std::string utf8(std::uint32_t cp) {
  std::string s;
  if (cp < 0x80) s += static_cast<char>(cp);
  else if (cp < 0x800) s += static_cast<char>(0xc0 | (cp >> 6)), s += static_cast<char>(0x80 | (cp & 0x3f));
  else if (cp < 0x10000)
    s += static_cast<char>(0xe0 | (cp >> 12)), s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f)),
        s += static_cast<char>(0x80 | (cp & 0x3f));
  else
    s += static_cast<char>(0xf0 | (cp >> 18)), s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f)),
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f)), s += static_cast<char>(0x80 | (cp & 0x3f));
  return s;
}

// Code points with their byte spans; invalid bytes decode as U+FFFD of length 1 so that
// every input byte still belongs to exactly one piece.
struct Cp {
  std::uint32_t cp;
  std::size_t begin, len;
};
std::vector<Cp> decode_utf8(const std::string& s) {
  std::vector<Cp> out;
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  for (std::size_t i = 0; i < s.size();) {
    const unsigned c = b[i];
    std::size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    std::uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    bool ok = len > 0 && i + len <= s.size();
    for (std::size_t j = 1; ok && j < len; ++j) {
      ok = (b[i + j] & 0xc0) == 0x80;
      cp = (cp << 6) | (b[i + j] & 0x3f);
    }
    if (!ok) cp = 0xfffd, len = 1;
    out.push_back({cp, i, len});
    i += len;
  }
  return out;
}

// ---- character classes ------------------------------------------------------------------
locale_t utf8_locale() {
  static locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
  return loc;
}
bool is_letter(std::uint32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return utf8_locale() && iswalpha_l(static_cast<wint_t>(c), utf8_locale());
}
bool is_number(std::uint32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return utf8_locale() && iswdigit_l(static_cast<wint_t>(c), utf8_locale());
}
bool is_space(std::uint32_t c) {
  if (c < 0x80) return c == ' ' || (c >= '\t' && c <= '\r');
  return c == 0x85 || c == 0xa0 || (utf8_locale() && iswspace_l(static_cast<wint_t>(c), utf8_locale()));
}
bool is_other(std::uint32_t c) { return !is_space(c) && !is_letter(c) && !is_number(c); }

// ---- bytes_to_unicode -------------------------------------------------------------------
struct ByteMap {
  std::string to_unicode[256];                      // byte -> UTF-8 of its code point
  std::unordered_map<std::uint32_t, int> to_byte;  // code point -> byte
  ByteMap() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
      const std::uint32_t cp = printable ? static_cast<std::uint32_t>(b) : 256u + static_cast<std::uint32_t>(n++);
      to_unicode[b] = utf8(cp);
      to_byte[cp] = b;
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

class Gpt2Bpe final : public Tokenizer {
 public:
  explicit Gpt2Bpe(const std::string& dir) {
    std::string vocab, merges;
    if (exists(dir + "/vocab.json") && exists(dir + "/merges.txt")) {
      vocab = dir + "/vocab.json", merges = dir + "/merges.txt";
    } else if (exists(dir + "/encoder.json") && exists(dir + "/vocab.bpe")) {
      vocab = dir + "/encoder.json", merges = dir + "/vocab.bpe";
    } else {
      SB_USER_FAIL("gpt2-bpe: '{}' holds neither vocab.json + merges.txt (Hugging Face) nor "
                   "encoder.json + vocab.bpe (OpenAI); point tokenizer_dir at one of them", dir);
    }
    std::ifstream vf(vocab);
    SB_REQUIRE(vf.good(), "gpt2-bpe: cannot open '{}'", vocab);
    nlohmann::json j;
    try {
      vf >> j;
    } catch (const std::exception& e) {
      SB_USER_FAIL("gpt2-bpe: '{}' is not valid JSON: {}", vocab, e.what());
    }
    SB_REQUIRE(j.is_object(), "gpt2-bpe: '{}' must be a JSON object token -> id", vocab);
    for (auto it = j.begin(); it != j.end(); ++it) {
      const int id = it.value().get<int>();
      encoder_[it.key()] = id;
      if (static_cast<std::size_t>(id) >= decoder_.size()) decoder_.resize(id + 1);
      decoder_[id] = it.key();
    }
    std::ifstream mf(merges);
    SB_REQUIRE(mf.good(), "gpt2-bpe: cannot open '{}'", merges);
    std::string line;
    int rank = 0, lineno = 0;
    while (std::getline(mf, line)) {
      ++lineno;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || (lineno == 1 && line.rfind("#version", 0) == 0)) continue;
      const auto sp = line.find(' ');
      SB_REQUIRE(sp != std::string::npos && sp > 0 && sp + 1 < line.size(),
                 "gpt2-bpe: {}:{}: a merge must be two symbols separated by one space, got '{}'", merges, lineno, line);
      ranks_[line.substr(0, sp) + '\x01' + line.substr(sp + 1)] = rank++;
    }
  }

  std::string name() const override { return "gpt2-bpe"; }
  std::int64_t vocab_size() const override { return static_cast<std::int64_t>(decoder_.size()); }

  std::vector<std::int32_t> encode(const std::string& text) const override {
    std::vector<std::int32_t> out;
    for (const auto& piece : gpt2_pretokenize(text)) {
      std::vector<std::string> sym;
      for (unsigned char c : piece) sym.push_back(byte_map().to_unicode[c]);
      merge(sym);
      for (const auto& s : sym) {
        auto it = encoder_.find(s);
        SB_REQUIRE(it != encoder_.end(), "gpt2-bpe: symbol '{}' (from '{}') is not in the vocabulary; "
                   "vocabulary and merges do not belong together", s, piece);
        out.push_back(it->second);
      }
    }
    return out;
  }

  std::string decode(const std::vector<std::int32_t>& ids) const override {
    std::string out;
    for (auto id : ids) {
      SB_CHECK(id >= 0 && static_cast<std::size_t>(id) < decoder_.size() && !decoder_[id].empty(),
               "gpt2-bpe: id {} is not in the vocabulary ({} entries)", id, decoder_.size());
      for (const auto& c : decode_utf8(decoder_[id])) {
        auto it = byte_map().to_byte.find(c.cp);
        SB_CHECK(it != byte_map().to_byte.end(), "gpt2-bpe: token {} holds U+{:04X}, not a byte code point", id, c.cp);
        out.push_back(static_cast<char>(it->second));
      }
    }
    return out;
  }

 private:
  // Repeatedly merges every occurrence of the lowest-ranked adjacent pair (encoder.py's bpe()).
  void merge(std::vector<std::string>& sym) const {
    while (sym.size() > 1) {
      int best = std::numeric_limits<int>::max();
      std::size_t at = 0;
      for (std::size_t i = 0; i + 1 < sym.size(); ++i) {
        auto it = ranks_.find(sym[i] + '\x01' + sym[i + 1]);
        if (it != ranks_.end() && it->second < best) best = it->second, at = i;
      }
      if (best == std::numeric_limits<int>::max()) return;
      const std::string a = sym[at], b = sym[at + 1];
      std::vector<std::string> next;
      for (std::size_t i = 0; i < sym.size();) {
        if (i + 1 < sym.size() && sym[i] == a && sym[i + 1] == b) next.push_back(a + b), i += 2;
        else next.push_back(sym[i++]);
      }
      sym.swap(next);
    }
  }

  std::unordered_map<std::string, int> encoder_;
  std::vector<std::string> decoder_;
  std::unordered_map<std::string, int> ranks_;  // "a\x01b" -> rank
};

}  // namespace

std::vector<std::string> gpt2_pretokenize(const std::string& text) {
  const auto cps = decode_utf8(text);
  const std::size_t n = cps.size();
  std::vector<std::string> out;
  auto emit = [&](std::size_t i, std::size_t j) {  // code points [i, j)
    out.push_back(text.substr(cps[i].begin, cps[j - 1].begin + cps[j - 1].len - cps[i].begin));
  };
  auto cp = [&](std::size_t i) { return i < n ? cps[i].cp : 0xffffffffu; };
  for (std::size_t i = 0; i < n;) {
    // 's 't 're 've 'm 'll 'd
    if (cp(i) == '\'') {
      const auto a = cp(i + 1), b = cp(i + 2);
      std::size_t len = 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd') len = 2;
      else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) len = 3;
      if (len) { emit(i, i + len); i += len; continue; }
    }
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
    bool matched = false;
    for (auto cls : {is_letter, is_number, is_other}) {
      std::size_t j = i + (cp(i) == ' ' ? 1 : 0);
      if (j < n && cls(cp(j))) {
        while (j < n && cls(cp(j))) ++j;
        emit(i, j);
        i = j;
        matched = true;
        break;
      }
    }
    if (matched) continue;
    // '\s+(?!\S)' then '\s+': a whitespace run followed by a non-space gives up its last
    // character (which then leads the next word as ' ?...'), unless the run is one long.
    std::size_t j = i;
    while (j < n && is_space(cp(j))) ++j;
    if (j == i) { emit(i, i + 1); ++i; continue; }  // unreachable: every code point is in a class
    if (j < n && j - i > 1) --j;
    emit(i, j);
    i = j;
  }
  return out;
}

std::unique_ptr<Tokenizer> make_gpt2_bpe_tokenizer(const std::string& dir) {
  return std::make_unique<Gpt2Bpe>(dir);
}

}  // namespace sb::data
