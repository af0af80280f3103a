// Token files in llm.c's layout (256 int32 header: magic 20240520, version 1, token count;
// then uint16 tokens) and UTF-8 text files turned into token streams.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sb::data {

class Tokenizer;

constexpr std::int32_t kTokenFileMagic = 20240520;
constexpr std::int32_t kTokenFileVersion = 1;

// Reads and validates (magic, version, size); errors name the file and what is wrong.
std::vector<std::int32_t> read_token_file(const std::string& path);
// Writes atomically (temporary name, then rename). Tokens must fit in uint16.
void write_token_file(const std::string& path, const std::vector<std::int32_t>& tokens);

// The file's bytes, checked to be valid UTF-8: errors name the file and, for bad text, the
// byte offset of the first invalid sequence. Every reader of text datasets goes through here.
std::string read_utf8_file(const std::string& path);
// read_utf8_file, tokenized as one stream.
std::vector<std::int32_t> read_text_tokens(const std::string& path, const Tokenizer& tok);
// Offset of the first invalid UTF-8 sequence, or -1.
std::int64_t first_invalid_utf8(const std::string& s);

}  // namespace sb::data
