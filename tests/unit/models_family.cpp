// Model families describe themselves: callers ask the family (objective, metric, data, name
// map, capabilities) instead of comparing names, and an unknown family is an error.
#include <gtest/gtest.h>

#include "harness/core/check.h"
#include "workloads/models/family.h"
#include "workloads/models/model.h"

using namespace sb::models;

TEST(Family, EveryPresetBelongsToARegisteredFamilyThatBuildsIt) {
  for (const auto& preset : preset_names()) {
    const ModelConfig c = preset_config(preset);
    const Family& f = family(c.family);
    EXPECT_EQ(f.name, c.family);
    if (preset.find("tiny") != std::string::npos) EXPECT_EQ(make_model(preset)->config().family, f.name);
  }
}

TEST(Family, DeclaresWhatCallersUsedToInferFromTheName) {
  const Family& g = family("gpt2");
  EXPECT_EQ(g.objective, Objective::CausalLm);
  EXPECT_EQ(g.eval_metric, "perplexity");
  EXPECT_TRUE(g.trains_on_token_files && g.generates && !g.classifies);
  EXPECT_EQ(g.hf_name("transformer.h.0.attn.c_attn.weight"), "h.0.attn.c_attn.weight");
  EXPECT_EQ(g.hf_name("h.0.attn.bias"), "");  // the causal-mask buffer is not ours
  EXPECT_TRUE(g.hf_transposed("h.0.mlp.c_fc.weight"));
  EXPECT_FALSE(g.hf_transposed("h.0.ln_1.weight"));
  const Family& b = family("bert");
  EXPECT_EQ(b.objective, Objective::MaskedLm);
  EXPECT_EQ(b.eval_metric, "mlm_accuracy");
  EXPECT_TRUE(!b.trains_on_token_files && !b.generates && b.classifies);
  EXPECT_EQ(b.hf_name("encoder.layer.0.output.LayerNorm.gamma"),
            "bert.encoder.layer.0.output.LayerNorm.weight");
  EXPECT_FALSE(b.hf_transposed("bert.encoder.layer.0.attention.self.query.weight"));
}

// Tensors transformers saves that are not parameters are skipped with a reason (the load's
// note); hf_name is "" exactly for them; BERT's pooler may be missing (BertForMaskedLM).
TEST(Family, NamesWhyATensorIsSkipped) {
  const Family& g = family("gpt2");
  EXPECT_EQ(g.hf_skip("transformer.h.3.attn.bias"), "causal-mask buffer");
  EXPECT_EQ(g.hf_skip("h.0.attn.masked_bias"), "masked-bias buffer");
  EXPECT_EQ(g.hf_skip("lm_head.weight"), "LM head, tied to wte");
  EXPECT_EQ(g.hf_skip("h.0.attn.c_attn.bias"), "");
  EXPECT_EQ(g.hf_skip("h.0.attn.c_attn.weight"), "");
  const Family& b = family("bert");
  for (const char* n : {"embeddings.position_ids", "bert.embeddings.position_ids"})
    EXPECT_EQ(b.hf_skip(n), "position-ids buffer") << n;
  EXPECT_EQ(b.hf_skip("bert.embeddings.token_type_ids"), "token-type-ids buffer");
  EXPECT_EQ(b.hf_skip("cls.seq_relationship.weight"), "next-sentence head (BertForPreTraining)");
  EXPECT_EQ(b.hf_skip("cls.predictions.decoder.weight"),
            "MLM decoder, tied to the word embeddings and cls.predictions.bias");
  EXPECT_EQ(b.hf_skip("cls.predictions.bias"), "");  // the MLM head itself is loaded
  EXPECT_EQ(b.hf_name("cls.predictions.bias"), "cls.predictions.bias");
  EXPECT_EQ(b.hf_skip("bert.embeddings.token_type_embeddings.weight"), "");
  for (const Family* f : {&g, &b})
    for (const char* n : {"h.0.attn.bias", "lm_head.weight", "embeddings.position_ids",
                          "cls.seq_relationship.bias", "h.0.ln_1.weight", "pooler.dense.weight"})
      EXPECT_EQ(f->hf_name(n).empty(), !f->hf_skip(n).empty()) << f->name << " " << n;
  EXPECT_TRUE(b.hf_optional("bert.pooler.dense.weight"));
  EXPECT_FALSE(b.hf_optional("bert.embeddings.word_embeddings.weight"));
  EXPECT_FALSE(g.hf_optional("wte.weight"));
}

TEST(Family, AnUnknownFamilyIsAnErrorListingTheKnownOnes) {
  try {
    family("t5");
    FAIL() << "no error";
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown model family 't5'; known: bert, gpt2"),
              std::string::npos) << e.what();
  }
}
