// What this rank is doing now (its phase and step), for the failure messages that must say
// where a run failed (an out-of-memory error: "in step 3", "in evaluation after step 9").
// Workloads mark their stages; reading and writing cost an atomic each, from any thread.
#pragma once
#include <cstdint>
#include <string>

namespace sb {

// `phase` must outlive the run (a string literal): "build", "warm-up", "step", "evaluation",
// "checkpoint", "export", "query".
void set_phase(const char* phase);
// The step the rank is in (-1 before the first); set at the start of each step.
void set_phase_step(std::int64_t step);

// "step 3", "evaluation after step 9", "build", or "" before any mark.
std::string current_activity();

}  // namespace sb
