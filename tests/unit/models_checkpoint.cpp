// Activation checkpointing (models/checkpoint.h): GPT-2's and BERT's loss and every
// parameter's gradient under full (every block, every second block) and selective
// recomputation equal the plain forward's bit for bit, dropout on (its masks replay); the
// recomputation runs inside the provider's recompute scope, once per checkpointed block; and a
// bad mode is refused naming the choices.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "workloads/models/checkpoint.h"
#include "workloads/models/model.h"
#include "workloads/models/params.h"
#include "tests/unit/counting_params.h"

using namespace sb;

namespace {

models::Batch batch(const models::ModelConfig& c, std::int64_t B, std::int64_t T) {
  torch::manual_seed(11);
  models::Batch b;
  auto tok = torch::randint(c.vocab - 1, {B, T + 1}, torch::kInt64);
  b.input_ids = tok.narrow(1, 0, T).contiguous();
  b.targets = tok.narrow(1, 1, T).contiguous();
  if (c.family == "bert") b.targets.masked_fill_(torch::rand({B, T}) > 0.3, -100);
  b.dropout_step = 2;
  return b;
}

using sbtest::CountingParams;

struct Outcome {
  double loss = 0;
  std::vector<torch::Tensor> grads;
  int recomputed_acquires = 0;
};

Outcome run(const std::string& preset, const models::CheckpointConfig& ac) {
  auto model = models::make_model(preset);
  model->set_dropout({0.1, 0.1, 5});
  model->set_activation_checkpoint(ac);
  CountingParams p(models::init_params(model->units(), 3));
  const auto b = batch(model->config(), 2, 16);
  auto loss = model->loss(p, b);
  loss.backward();
  Outcome r;
  r.loss = loss.item<double>();
  for (auto& unit : p.inner().tensors())
    for (auto& t : unit) r.grads.push_back(t.grad().defined() ? t.grad().clone() : torch::Tensor());
  r.recomputed_acquires = p.scoped_acquires;
  return r;
}

}  // namespace

TEST(ActivationCheckpoint, EqualsThePlainForwardBitForBit) {
  using models::CheckpointMode;
  for (const std::string preset : {"gpt2-tiny", "bert-tiny"}) {
    const Outcome plain = run(preset, {});
    const auto L = models::make_model(preset)->config().n_layer;
    struct Case {
      models::CheckpointConfig ac;
      std::int64_t acquires;  // recomputed blocks' acquires
    };
    for (const Case& c : {Case{{CheckpointMode::Full, 1}, L}, Case{{CheckpointMode::Full, 2}, (L + 1) / 2},
                          Case{{CheckpointMode::Selective, 1}, 0}}) {
      const Outcome r = run(preset, c.ac);
      const std::string what = preset + (c.ac.mode == CheckpointMode::Full ? " full every " + std::to_string(c.ac.every)
                                                                           : " selective");
      EXPECT_EQ(r.loss, plain.loss) << what;
      ASSERT_EQ(r.grads.size(), plain.grads.size());
      for (std::size_t i = 0; i < r.grads.size(); ++i) {
        ASSERT_EQ(r.grads[i].defined(), plain.grads[i].defined()) << what << " parameter " << i;
        if (r.grads[i].defined()) EXPECT_TRUE(torch::equal(r.grads[i], plain.grads[i])) << what << " parameter " << i;
      }
      EXPECT_EQ(r.recomputed_acquires, c.acquires) << what;
    }
  }
}

TEST(ActivationCheckpoint, AnUnknownModeIsRefusedNamingTheChoices) {
  try {
    models::checkpoint_mode_from_name("partial");
    FAIL() << "accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("activation_checkpoint = \"partial\": use \"none\", \"full\""),
              std::string::npos) << e.what();
  }
}
