// Serving micro-benchmark (the Serving issue's targets) on GPT-2 (default gpt2, 124M), random
// weights, 2 intra-op threads, every figure beside its baseline measured in the same run:
//  decode   tokens/s of one decode step at batch B (default 32) against batch 1 (sequential
//           serving's step), the same context length, interleaved rounds; target >= 10x.
//  overhead the continuous server's scheduling and bookkeeping time over its step time, on
//           the steps that decoded B rows (offline arrivals, prompts 32-256, outputs 16-256);
//           target < 2%.
//  capacity (--capacity 1) the unloaded TPOT (sequential); the Poisson rate r_s at which the
//           static batcher's p99 TPOT reaches 2x it (geometric bisection); continuous at 3 r_s
//           against the same bound; and the highest rate of the ladder continuous serves within
//           it. Target: continuous meets the bound at >= 3 r_s.
// --ops N profiles one decode step at batch B and prints the N ops with the most self time.
// Usage: micro_bench_serve [--model gpt2] [--attention sdpa] [--quantization bf16|none] [--batch 32]
//          [--context 160] [--steps 16] [--rounds 3] [--requests 48] [--capacity 0|1] [--ops N]
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/core/machine.h"
#include "harness/core/mpi_context.h"
#include "suite/micro/bench_util.h"
#include "suite/micro/op_profile.h"
#include "workloads/infer/loadgen.h"
#include "workloads/models/params.h"
#include "workloads/quant/quantizer.h"
#include "workloads/serve/gpt2_executor.h"
#include "workloads/serve/metrics.h"

namespace {

using sb::bench::arg;
using sb::bench::now_s;
using namespace sb::serve;
using I = std::int64_t;

struct Setup {
  std::unique_ptr<sb::models::Model> model;
  sb::models::Gpt2* gpt2 = nullptr;
  std::unique_ptr<sb::quant::QuantizedWeights> q;
  std::string compute;
};

std::vector<I> prompt_tokens(I vocab, I request, I len) {
  auto t = torch::randint(vocab, {len}, at::detail::createCPUGenerator(1000 + static_cast<std::uint64_t>(request)));
  return {t.data_ptr<I>(), t.data_ptr<I>() + t.numel()};
}

std::unique_ptr<Gpt2Executor> executor(Setup& s, I rows, I capacity, const std::vector<RequestSpec>* reqs) {
  const I vocab = s.model->config().vocab;
  return std::make_unique<Gpt2Executor>(
      *s.gpt2, [&s](const auto& f) { return f(*s.q); },
      [vocab, reqs](I r) { return prompt_tokens(vocab, r < 0 ? 0 : r, reqs ? (*reqs)[r].prompt_len : 0); },
      rows, capacity, SamplingConfig{});
}

// Seconds per decode step at batch B and context `context` (prompts prefilled first); wrap
// runs the decode steps (the profiler's, for --ops).
double decode_step_s(Setup& s, I B, I context, I steps,
                     const std::function<void(const std::function<void()>&)>& wrap = {}) {
  const I vocab = s.model->config().vocab;
  auto ex = std::make_unique<Gpt2Executor>(
      *s.gpt2, [&s](const auto& f) { return f(*s.q); },
      [vocab, context](I r) { return prompt_tokens(vocab, -r, context); }, B, context + steps + 1,
      SamplingConfig{});
  std::vector<I> ids(B), lengths(B, context);
  for (I b = 0; b < B; ++b) ids[b] = -1 - b;
  auto last = ex->prefill(0, ids);
  const double t0 = now_s();
  auto decode = [&] {
    for (I k = 0; k < steps; ++k) {
      last = ex->decode(ids, last, lengths);
      for (auto& l : lengths) ++l;
    }
  };
  wrap ? wrap(decode) : decode();
  return (now_s() - t0) / static_cast<double>(steps);
}

std::vector<RequestSpec> requests(const std::string& arrival, double rate, I n) {
  ArrivalConfig a;
  a.arrival = arrival, a.request_rate = rate, a.requests = n;
  a.prompt_min = 32, a.prompt_max = 256, a.output_min = 16, a.output_max = 256;
  a.seed = 7;
  return draw_requests(a);
}

struct Run {
  ServeResult r;
  std::map<std::string, double> m;
};

Run serve(Setup& s, const std::string& policy, const std::vector<RequestSpec>& reqs, I batch) {
  PolicyConfig pc;
  pc.max_batch = batch;
  pc.max_queue_delay_s = 0.05;
  pc.max_prefill_tokens = 256;
  I cap = 1;
  for (const auto& r : reqs) cap = std::max(cap, r.prompt_len + r.output_len);
  const auto pol = make_policy(policy, pc);
  auto ex = executor(s, pol->max_running() > 0 ? std::min(batch, pol->max_running()) : batch, cap,
                     &reqs);
  Run out;
  out.r = run_server(reqs, *pol, *ex, ServerConfig{s.model->config().max_pos, -1});
  out.m = summarize(reqs, out.r, request_records(reqs, out.r, Slo{1e9, 1e9}));
  return out;
}

double p99_tpot(Setup& s, const std::string& policy, double rate, I n, I batch) {
  const double t0 = now_s();
  const auto run = serve(s, policy, requests("poisson", rate, n), batch);
  const double p99 = run.m.at("tpot_p99_s");
  std::printf("  %-10s rate %7.3f req/s: p99 TPOT %7.1f ms, p50 %7.1f ms, mean decode batch %5.1f, "
              "%6.1f tokens/s (%.0f s)\n", policy.c_str(), rate, 1e3 * p99, 1e3 * run.m.at("tpot_p50_s"),
              run.m.count("decode_batch_mean") ? run.m.at("decode_batch_mean") : 0.0,
              run.m.at("output_tokens_per_s"), now_s() - t0);
  std::fflush(stdout);
  return p99;
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(2);
  torch::NoGradGuard ng;
  c10::InferenceMode im;
  const std::string model_name = arg(argc, argv, "--model", "gpt2");
  const std::string qname = arg(argc, argv, "--quantization", "bf16");
  // sdpa: LibTorch's fused kernel reads the KV rows in place; naive's bf16 batched matmul
  // first copies the strided keys and values of every row (docs/SERVING.md).
  const std::string attention = arg(argc, argv, "--attention", "sdpa");
  const I B = std::atoll(arg(argc, argv, "--batch", "32").c_str());
  const I context = std::atoll(arg(argc, argv, "--context", "160").c_str());
  const I steps = std::atoll(arg(argc, argv, "--steps", "16").c_str());
  const int rounds = std::atoi(arg(argc, argv, "--rounds", "3").c_str());
  const I n = std::atoll(arg(argc, argv, "--requests", "48").c_str());
  const bool capacity = std::atoi(arg(argc, argv, "--capacity", "0").c_str()) != 0;
  const int top = std::atoi(arg(argc, argv, "--ops", "0").c_str());

  Setup s;
  s.model = sb::models::make_model(model_name, attention);
  s.gpt2 = dynamic_cast<sb::models::Gpt2*>(s.model.get());
  if (!s.gpt2) {
    std::fprintf(stderr, "micro_bench_serve: %s is not a GPT-2 model\n", model_name.c_str());
    return 2;
  }
  const auto dtype = sb::quant::compute_dtype(qname, "auto", torch::kCPU, &s.compute);
  s.q = sb::quant::quantize(qname, *s.model, sb::models::init_params(s.model->units(), 1), dtype);
  const auto mach = sb::machine_now(sb::host_name());
  std::vector<std::string> units;
  for (const char* f : {"avx512_bf16", "amx_bf16", "amx_int8", "avx512_vnni"})
    if (std::find(mach.isa.begin(), mach.isa.end(), f) != mach.isa.end()) units.push_back(f);
  std::printf("# %s, attention %s, quantization %s computing in %s (%s), 2 threads; CPU %s; units: %s\n",
              model_name.c_str(), attention.c_str(), qname.c_str(), c10::toString(dtype), s.compute.c_str(),
              mach.cpu_model.c_str(), units.empty() ? "none" : fmt::format("{}", fmt::join(units, ", ")).c_str());

  // 1. Decode throughput, batch B against batch 1, interleaved.
  decode_step_s(s, 1, context, 2), decode_step_s(s, B, context, 2);  // warm-up
  std::vector<double> one, many;
  for (int r = 0; r < rounds; ++r) {
    one.push_back(decode_step_s(s, 1, context, steps));
    many.push_back(decode_step_s(s, B, context, steps));
    std::printf("round %d: decode step batch 1 %.1f ms (%.1f tokens/s), batch %lld %.1f ms (%.1f tokens/s)\n",
                r, 1e3 * one.back(), 1 / one.back(), static_cast<long long>(B), 1e3 * many.back(),
                static_cast<double>(B) / many.back());
  }
  const double t1 = sb::infer::quantile(one, 0.5), tb = sb::infer::quantile(many, 0.5);
  const double ratio = static_cast<double>(B) * t1 / tb;
  std::printf("decode at context %lld: batch %lld %.1f tokens/s vs sequential %.1f tokens/s = %.2fx "
              "(target >= 10x: %s)\n", static_cast<long long>(context), static_cast<long long>(B),
              static_cast<double>(B) / tb, 1 / t1, ratio, ratio >= 10 ? "PASS" : "MISS");
  std::fflush(stdout);

  if (top > 0) {
    std::map<std::string, double> by_class, by_op;
    double ops_ns = 0;
    decode_step_s(s, B, context, steps, [&](const std::function<void()>& decode) {
      sb::bench::profile_ops(decode, by_class, by_op, ops_ns);
    });
    std::vector<std::pair<std::string, double>> ops(by_op.begin(), by_op.end());
    std::sort(ops.begin(), ops.end(), [](auto& a, auto& b) { return a.second > b.second; });
    std::printf("\n%-48s %12s   (batch %lld, mean of %lld decode steps)\n", "op (self time)", "ms/step",
                static_cast<long long>(B), static_cast<long long>(steps));
    for (int i = 0; i < top && i < static_cast<int>(ops.size()); ++i)
      std::printf("%-48s %12.2f\n", ops[i].first.c_str(), ops[i].second / static_cast<double>(steps) / 1e6);
  }

  // 2. Scheduling overhead of the continuous server on its full-batch steps.
  {
    const auto run = serve(s, "continuous", requests("offline", 0, 2 * B), B);
    double sched = 0, total = 0;
    I full = 0;
    for (const auto& st : run.r.steps)
      if (st.decode_rows == B) sched += st.schedule_s, total += st.duration_s(), ++full;
    std::printf("scheduling overhead at batch %lld: %.3f%% of step time over %lld full steps "
                "(%.3f ms of %.1f ms per step; target < 2%%: %s)\n", static_cast<long long>(B),
                full ? 100 * sched / total : 0.0, static_cast<long long>(full),
                full ? 1e3 * sched / static_cast<double>(full) : 0.0,
                full ? 1e3 * total / static_cast<double>(full) : 0.0,
                full && sched / total < 0.02 ? "PASS" : "MISS");
    std::fflush(stdout);
  }
  if (!capacity) return 0;

  // 3. Capacity at equal p99 TPOT: static's rate where p99 TPOT reaches 2x unloaded, then continuous.
  const auto alone = serve(s, "sequential", requests("offline", 0, std::min<I>(n, 8)), 1);
  const double bound = 2 * alone.m.at("tpot_p50_s");
  std::printf("unloaded TPOT %.1f ms (sequential, median); bound = 2x = %.1f ms\n",
              1e3 * alone.m.at("tpot_p50_s"), 1e3 * bound);
  double lo = 0, hi = 0;
  for (double r = 0.125; r <= 64; r *= 2) {
    if (p99_tpot(s, "static", r, n, B) >= bound) {
      hi = r;
      break;
    }
    lo = r;
  }
  if (hi == 0) {
    std::printf("static never reached the bound up to 64 req/s\n");
    return 0;
  }
  if (lo > 0) {
    for (int k = 0; k < 2; ++k) {  // geometric bisection of [lo, hi]
      const double mid = std::sqrt(lo * hi);
      (p99_tpot(s, "static", mid, n, B) >= bound ? hi : lo) = mid;
    }
  }
  const double rs = hi;  // the lowest rate found at or above the bound
  std::printf("static reaches p99 TPOT >= %.1f ms at %.3f req/s (r_s; below it at %.3f)\n", 1e3 * bound, rs, lo);
  double best = 0;
  for (double f : {1.0, 2.0, 3.0, 4.0, 6.0, 8.0}) {
    if (p99_tpot(s, "continuous", f * rs, n, B) > bound) break;
    best = f;
  }
  std::printf("continuous keeps p99 TPOT <= %.1f ms up to %.0fx r_s (target >= 3x: %s)\n", 1e3 * bound,
              best, best >= 3 ? "PASS" : "MISS");
  return 0;
}
