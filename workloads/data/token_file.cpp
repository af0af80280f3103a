// .bin token files (llm.c layout) and UTF-8 text datasets.
#include "workloads/data/token_file.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "harness/core/check.h"
#include "workloads/data/tokenizer.h"

namespace sb::data {

std::vector<std::int32_t> read_token_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  SB_REQUIRE(f.good(), "cannot open token file '{}'", path);
  std::int32_t header[256];
  f.read(reinterpret_cast<char*>(header), sizeof(header));
  SB_REQUIRE(f.gcount() == sizeof(header), "token file '{}' is shorter than its 1024-byte header", path);
  SB_REQUIRE(header[0] == kTokenFileMagic,
             "token file '{}': magic {} is not {} (llm.c .bin layout); is it a token file?", path,
             header[0], kTokenFileMagic);
  SB_REQUIRE(header[1] == kTokenFileVersion, "token file '{}': version {} unsupported (expected {})",
             path, header[1], kTokenFileVersion);
  SB_REQUIRE(header[2] >= 0, "token file '{}': negative token count {}", path, header[2]);
  std::vector<std::uint16_t> raw(static_cast<std::size_t>(header[2]));
  f.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size() * 2));
  SB_REQUIRE(static_cast<std::size_t>(f.gcount()) == raw.size() * 2,
             "token file '{}': header says {} tokens but only {} bytes follow", path, header[2], f.gcount());
  return std::vector<std::int32_t>(raw.begin(), raw.end());  // little-endian host assumed (x86, arm64)
}

void write_token_file(const std::string& path, const std::vector<std::int32_t>& tokens) {
  SB_CHECK(tokens.size() <= 0x7fffffffULL, "write_token_file: {} tokens exceed the int32 count", tokens.size());
  std::int32_t header[256] = {kTokenFileMagic, kTokenFileVersion, static_cast<std::int32_t>(tokens.size())};
  std::vector<std::uint16_t> raw(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    SB_CHECK(tokens[i] >= 0 && tokens[i] < 65536, "write_token_file: token {} at {} does not fit uint16",
             tokens[i], i);
    raw[i] = static_cast<std::uint16_t>(tokens[i]);
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    SB_CHECK(f.good(), "cannot create '{}'", tmp);
    f.write(reinterpret_cast<const char*>(header), sizeof(header));
    f.write(reinterpret_cast<const char*>(raw.data()), static_cast<std::streamsize>(raw.size() * 2));
    SB_CHECK(f.good(), "writing '{}' failed (disk full?)", tmp);
  }
  SB_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '{}' to '{}'", tmp, path);
}

std::int64_t first_invalid_utf8(const std::string& s) {
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned c = b[i];
    std::size_t len;
    std::uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xe0) == 0xc0) len = 2, cp = c & 0x1f;
    else if ((c & 0xf0) == 0xe0) len = 3, cp = c & 0x0f;
    else if ((c & 0xf8) == 0xf0) len = 4, cp = c & 0x07;
    else return static_cast<std::int64_t>(i);
    if (i + len > n) return static_cast<std::int64_t>(i);
    for (std::size_t j = 1; j < len; ++j) {
      if ((b[i + j] & 0xc0) != 0x80) return static_cast<std::int64_t>(i);
      cp = (cp << 6) | (b[i + j] & 0x3f);
    }
    // Overlong encodings, surrogates and values past U+10FFFF are invalid.
    const std::uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return static_cast<std::int64_t>(i);
    i += len;
  }
  return -1;
}

std::string read_utf8_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  SB_REQUIRE(f.good(), "cannot open text dataset '{}'", path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  const auto bad = first_invalid_utf8(text);
  SB_REQUIRE(bad < 0, "text dataset '{}' is not valid UTF-8 at byte {}; convert it (iconv -t UTF-8)", path, bad);
  return text;
}

std::vector<std::int32_t> read_text_tokens(const std::string& path, const Tokenizer& tok) {
  return tok.encode(read_utf8_file(path));
}

}  // namespace sb::data
