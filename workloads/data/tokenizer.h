// Tokenizers behind one interface, chosen by name: "byte" (UTF-8 bytes, vocab 256),
// "gpt2-bpe" (GPT-2's byte-level BPE from local files) and "bert-wordpiece" (BERT's uncased
// basic tokenizer + WordPiece from a local vocab.txt).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sb::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string name() const = 0;
  virtual std::int64_t vocab_size() const = 0;
  virtual std::vector<std::int32_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<std::int32_t>& ids) const = 0;
  // The id of a special token such as "[CLS]"; -1 when the vocabulary has none.
  virtual std::int32_t token_id(const std::string& token) const { return -1; }
};

// dir: for gpt2-bpe, a directory holding vocab.json + merges.txt (Hugging Face layout) or
// encoder.json + vocab.bpe (OpenAI layout); for bert-wordpiece, one holding vocab.txt (a
// Hugging Face BERT folder); ignored by byte.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name, const std::string& dir = "");
std::vector<std::string> tokenizer_names();

std::unique_ptr<Tokenizer> make_byte_tokenizer();
std::unique_ptr<Tokenizer> make_gpt2_bpe_tokenizer(const std::string& dir);
std::unique_ptr<Tokenizer> make_bert_wordpiece_tokenizer(const std::string& dir);

// GPT-2's pre-tokenization ('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)
// as a hand-written matcher over UTF-8: std::regex has no \p{L}. Letters, digits and spaces
// outside ASCII are classified by the C.UTF-8 locale (glibc's Unicode tables), which
// differs from Unicode's \p{N} for a few non-ASCII numerals (superscripts, fractions).
std::vector<std::string> gpt2_pretokenize(const std::string& text);

}  // namespace sb::data
