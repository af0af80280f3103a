// GPT-2's parameter indices within its units (gpt2.h), shared by its forward's files.
#pragma once

namespace sb::models::gpt2_layout {

// A block unit, in UnitSpec order.
enum Block { kLn1W, kLn1B, kAttnW, kAttnB, kProjW, kProjB, kLn2W, kLn2B, kFcW, kFcB, kMlpW, kMlpB };
// An MoE block (moe.h) has the router in the MLP's place; its experts, stacked on a leading
// axis, are a unit of their own after the head (UnitSpec::expert: expert parallelism shards
// and reduces them over another group), in this order.
enum MoeBlock { kRouterW = kFcW };
enum Experts { kExpFcW, kExpFcB, kExpProjW, kExpProjB };

}  // namespace sb::models::gpt2_layout
