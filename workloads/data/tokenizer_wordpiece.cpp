// "bert-wordpiece": BERT's uncased tokenizer (google-research/bert tokenization.py, the
// reference transformers' BertTokenizer follows) from a local vocab.txt (one token a line,
// its line number its id):
//   1. clean (the reference's _clean_text): drop U+0000, U+FFFD and every "other" character
//      (categories C*: controls other than tab / newline / carriage return, format characters
//      such as the soft hyphen, zero-width joiners, BOM, private use, unassigned); every
//      whitespace (tab, newline, carriage return, Zs such as the no-break space) becomes a
//      space; U+2028 / U+2029 split words too (the reference's str.split());
//   2. put spaces around CJK ideographs (each becomes its own word);
//   3. split on whitespace; lower-case and strip accents (decompose, drop non-spacing marks);
//   4. split off every punctuation character (ASCII non-alphanumerics and categories P*) as
//      its own word;
//   5. WordPiece each word: the longest vocabulary prefix, then the longest "##" continuation,
//      and so on; a word with no full cover, or longer than 100 characters, is [UNK].
// Categories come from tables generated from Python's unicodedata (unicode_tables.h), the
// reference's own source. Two documented differences: accents are stripped from Latin-1 and
// Latin Extended-A letters only (a table of their decompositions; other scripts keep
// precomposed accents, though a separate non-spacing mark is dropped everywhere), and upper
// case is lowered by the C.UTF-8 locale's one-to-one mapping (glibc), where Python's
// str.lower() also has a few one-to-many mappings.
#include <clocale>
#include <cwctype>
#include <fstream>
#include <unordered_map>

#include <locale.h>

#include "harness/core/check.h"
#include "workloads/data/tokenizer.h"
#include "workloads/data/unicode_tables.h"

namespace sb::data {
namespace {

std::string utf8(std::uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xf0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

// Code points of s; an invalid byte decodes as U+FFFD (then dropped by cleaning).
std::vector<std::uint32_t> code_points(const std::string& s) {
  std::vector<std::uint32_t> out;
  out.reserve(s.size());
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  for (std::size_t i = 0; i < s.size();) {
    const unsigned c = b[i];
    if (c < 0x80) {
      out.push_back(c);
      ++i;
      continue;
    }
    std::size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    std::uint32_t cp = len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    bool ok = len > 0 && i + len <= s.size();
    for (std::size_t j = 1; ok && j < len; ++j) {
      ok = (b[i + j] & 0xc0) == 0x80;
      cp = (cp << 6) | (b[i + j] & 0x3f);
    }
    out.push_back(ok ? cp : 0xfffd);
    i += ok ? len : 1;
  }
  return out;
}

// glibc's classes need a UTF-8 locale; a newlocale handle leaves the process's alone.
locale_t utf8_locale() {
  static locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  return loc;
}

// The reference's _is_whitespace, plus the line and paragraph separators its str.split()
// splits on after cleaning.
bool is_whitespace(std::uint32_t c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return true;
  return c >= 0x80 && (c == 0x2028 || c == 0x2029 || unicode::in(unicode::kSpaceSeparator, c));
}
// The reference's _is_control: category C*, except tab, newline and carriage return (spaces).
bool is_control(std::uint32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return c < 0x20 || c == 0x7f || (c >= 0x80 && unicode::in(unicode::kOther, c));
}
bool is_punctuation(std::uint32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126))
    return true;  // the reference counts every ASCII non-alphanumeric as punctuation
  return c >= 0x80 && unicode::in(unicode::kPunctuation, c);
}
bool is_cjk(std::uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// The base letter of an accented Latin letter (its NFD minus the combining marks, as Python's
// unicodedata gives it), for U+00E0..U+017F; 0 = none ('.' in the tables: letters such as
// ae, o with stroke, thorn or ligatures that do not decompose). Upper case is lowered first.
std::uint32_t strip_accent(std::uint32_t c) {
  static const char latin1[] = "aaaaaa.ceeeeiiii.nooooo..uuuuy.y";  // U+00E0..U+00FF
  static const char ext_a[] =                                        // U+0100..U+017F
      "aaaaaaccccccccdd..eeeeeeeeeegggggggghh..iiiiiiiii...jjkk.llllll....nnnnnn...oooooo.."
      "rrrrrrsssssssstttt..uuuuuuuuuuuuwwyyyzzzzzz.";
  static_assert(sizeof(latin1) == 33 && sizeof(ext_a) == 129, "one letter per code point");
  char b = '.';
  if (c >= 0xe0 && c <= 0xff) b = latin1[c - 0xe0];
  else if (c >= 0x100 && c <= 0x17f) b = ext_a[c - 0x100];
  return b == '.' ? 0 : static_cast<std::uint32_t>(b);
}
// Mn: what stripping accents drops (after decomposition in the reference).
bool is_nonspacing_mark(std::uint32_t c) {
  return c >= 0x300 && unicode::in(unicode::kNonspacingMark, c);
}

class WordPiece final : public Tokenizer {
 public:
  explicit WordPiece(const std::string& dir) {
    const std::string path = dir + "/vocab.txt";
    std::ifstream f(path);
    SB_REQUIRE(f.good(), "bert-wordpiece: cannot open '{}' (a BERT tokenizer folder holds "
                         "vocab.txt, one token per line)", path);
    std::string line;
    std::int32_t id = 0;
    while (std::getline(f, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      vocab_.emplace(line, id);  // a repeated line keeps its first id, as the reference
      pieces_.push_back(line);
      ++id;
    }
    SB_REQUIRE(id > 0, "bert-wordpiece: '{}' is empty", path);
    auto need = [&](const char* t) {
      auto it = vocab_.find(t);
      SB_REQUIRE(it != vocab_.end(), "bert-wordpiece: '{}' lacks the token {}", path, t);
      return it->second;
    };
    unk_ = need("[UNK]");
  }

  std::string name() const override { return "bert-wordpiece"; }
  std::int64_t vocab_size() const override { return static_cast<std::int64_t>(pieces_.size()); }

  std::vector<std::int32_t> encode(const std::string& text) const override {
    std::vector<std::int32_t> out;
    std::vector<std::uint32_t> word;
    auto flush = [&] {
      if (!word.empty()) wordpiece(word, out);
      word.clear();
    };
    for (std::uint32_t c : code_points(text)) {
      if (c == 0 || c == 0xfffd || is_control(c)) continue;
      if (is_whitespace(c)) {
        flush();
        continue;
      }
      if (is_nonspacing_mark(c)) continue;  // accents of a decomposed letter, variation
                                            // selectors (U+FE0F after an emoji), ...
      if (is_cjk(c) || is_punctuation(c)) {  // a word of its own
        flush();
        word.push_back(c);
        flush();
        continue;
      }
      if (c < 0x80) {
        word.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
        continue;
      }
      c = static_cast<std::uint32_t>(towlower_l(static_cast<wint_t>(c), utf8_locale()));
      const std::uint32_t base = strip_accent(c);
      word.push_back(base ? base : c);
    }
    flush();
    return out;
  }

  std::int32_t token_id(const std::string& token) const override {
    auto it = vocab_.find(token);
    return it == vocab_.end() ? -1 : it->second;
  }

  std::string decode(const std::vector<std::int32_t>& ids) const override {
    std::string s;
    for (auto id : ids) {
      SB_CHECK(id >= 0 && id < static_cast<std::int32_t>(pieces_.size()),
               "bert-wordpiece: id {} is outside the vocabulary of {}", id, pieces_.size());
      const std::string& p = pieces_[static_cast<std::size_t>(id)];
      if (p.rfind("##", 0) == 0) s += p.substr(2);
      else s += (s.empty() ? "" : " ") + p;
    }
    return s;
  }

 private:
  // Greedy longest-match-first over the word's characters (max 100, the reference's limit).
  void wordpiece(const std::vector<std::uint32_t>& w, std::vector<std::int32_t>& out) const {
    if (w.size() > 100) {
      out.push_back(unk_);
      return;
    }
    std::vector<std::size_t> at(w.size() + 1, 0);  // byte offset of each character
    std::string bytes;
    for (std::size_t i = 0; i < w.size(); ++i) {
      at[i] = bytes.size();
      bytes += utf8(w[i]);
    }
    at[w.size()] = bytes.size();
    const std::size_t first = out.size();
    std::string key;
    for (std::size_t start = 0; start < w.size();) {
      std::size_t end = w.size();
      std::int32_t id = -1;
      for (; end > start; --end) {
        key.assign(start > 0 ? "##" : "");
        key.append(bytes, at[start], at[end] - at[start]);
        auto it = vocab_.find(key);
        if (it != vocab_.end()) {
          id = it->second;
          break;
        }
      }
      if (id < 0) {  // no cover: the whole word is unknown
        out.resize(first);
        out.push_back(unk_);
        return;
      }
      out.push_back(id);
      start = end;
    }
  }

  std::unordered_map<std::string, std::int32_t> vocab_;
  std::vector<std::string> pieces_;
  std::int32_t unk_ = 0;
};

}  // namespace

std::unique_ptr<Tokenizer> make_bert_wordpiece_tokenizer(const std::string& dir) {
  return std::make_unique<WordPiece>(dir);
}

}  // namespace sb::data
