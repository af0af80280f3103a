// Tokenizer registry: name -> implementation.
#include "workloads/data/tokenizer.h"

#include "harness/core/check.h"

namespace sb::data {

std::vector<std::string> tokenizer_names() { return {"byte", "gpt2-bpe", "bert-wordpiece"}; }

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name, const std::string& dir) {
  if (name == "byte") return make_byte_tokenizer();
  if (name == "gpt2-bpe") return make_gpt2_bpe_tokenizer(dir);
  if (name == "bert-wordpiece") return make_bert_wordpiece_tokenizer(dir);
  SB_FAIL("unknown tokenizer '{}'; known: byte, gpt2-bpe, bert-wordpiece", name);
}

}  // namespace sb::data
