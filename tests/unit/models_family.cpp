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

TEST(Family, AnUnknownFamilyIsAnErrorListingTheKnownOnes) {
  try {
    family("t5");
    FAIL() << "no error";
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown model family 't5'; known: bert, gpt2"),
              std::string::npos) << e.what();
  }
}
