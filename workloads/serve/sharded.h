// Sharded serving (world > 1): one scheduler, on rank 0, decides every step for all ranks.
// Rank 0 runs the server loop on a Leader, which broadcasts each executor call before making
// it; every other rank follows: it receives the calls and makes the same ones on its own
// executor, so the sharded forwards (the FSDP engine's all-gathers) run in the same order on
// every rank. Tokens are chosen on rank 0 (decode calls carry the last tokens to feed).
#pragma once
#include <mpi.h>

#include <functional>

#include "workloads/serve/server.h"

namespace sb::serve {

class Leader final : public Executor {
 public:
  Leader(Executor& inner, MPI_Comm comm) : inner_(inner), comm_(comm) {}
  std::int64_t rows() const override { return inner_.rows(); }
  std::int64_t row_capacity() const override { return inner_.row_capacity(); }
  std::int64_t kv_bytes_per_token() const override { return inner_.kv_bytes_per_token(); }
  std::vector<std::int64_t> prefill(std::int64_t first, const std::vector<std::int64_t>& requests) override;
  std::vector<std::int64_t> decode(const std::vector<std::int64_t>& requests,
                                   const std::vector<std::int64_t>& last,
                                   const std::vector<std::int64_t>& lengths) override;
  void move_row(std::int64_t from, std::int64_t to, std::int64_t length) override;
  std::int64_t prefill_cost(const std::vector<std::int64_t>& prompt_lens) const override {
    return inner_.prefill_cost(prompt_lens);
  }
  std::string prefill_batching() const override { return inner_.prefill_batching(); }
  void begin_step(std::int64_t step);  // the followers call on_step(step) too
  void finish();                       // the followers return

 private:
  Executor& inner_;
  MPI_Comm comm_;
};

// Every rank but 0: makes the calls rank 0's Leader broadcasts until it finishes.
void follow(Executor& ex, MPI_Comm comm, const std::function<void(std::int64_t step)>& on_step);

}  // namespace sb::serve
