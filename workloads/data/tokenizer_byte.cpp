// "byte" tokenizer: one token per UTF-8 byte (vocab 256); lossless for any input.
#include "workloads/data/tokenizer.h"

#include "harness/core/check.h"

namespace sb::data {
namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  std::string name() const override { return "byte"; }
  std::int64_t vocab_size() const override { return 256; }
  std::vector<std::int32_t> encode(const std::string& text) const override {
    std::vector<std::int32_t> out(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) out[i] = static_cast<unsigned char>(text[i]);
    return out;
  }
  std::string decode(const std::vector<std::int32_t>& ids) const override {
    std::string out;
    for (auto id : ids) {
      SB_CHECK(id >= 0 && id < 256, "byte tokenizer: id {} outside [0, 256)", id);
      out.push_back(static_cast<char>(id));
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer() { return std::make_unique<ByteTokenizer>(); }

}  // namespace sb::data
