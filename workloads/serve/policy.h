// Batching policies of the serve task, one file each (policy_<name>.cpp), chosen by the
// `serve_policy` key. A policy only decides which waiting requests start now; the server
// (server.h) runs them: prefill, decode steps, KV rows.
#pragma once
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "workloads/serve/requests.h"

namespace sb::serve {

struct PolicyConfig {
  std::int64_t max_batch = 8;          // most requests running at once
  double max_queue_delay_s = 0.01;     // static: longest wait for a fuller batch
  std::int64_t max_prefill_tokens = 1024;  // continuous: prompt tokens prefilled per step
};

// What the server shows a policy at a decision point (its virtual clock `now`).
struct ServerView {
  double now = 0;
  const std::deque<std::int64_t>* waiting = nullptr;  // request ids, in arrival order
  const std::vector<RequestSpec>* requests = nullptr;
  std::int64_t running = 0;    // requests holding a KV row (static: the batch's, finished or not)
  std::int64_t free_rows = 0;  // KV rows free
  double next_arrival_s = std::numeric_limits<double>::infinity();  // none left: infinity
};

struct Decision {
  std::int64_t admit = 0;  // start this many requests from the front of the queue
  // Nothing admitted and nothing running: decide again at this time (or at the next arrival,
  // if sooner). Infinity: at the next arrival.
  double wake_s = std::numeric_limits<double>::infinity();
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string name() const = 0;
  virtual Decision decide(const ServerView& v) const = 0;
  // true: a finished request keeps its row and is decoded as padding until every request of
  // its batch has finished (static batching); false: it leaves at once (continuous).
  virtual bool batch_runs_to_completion() const = 0;
  // The most requests it ever runs at once (0 = as many as the KV rows hold): the rows the
  // server allocates.
  virtual std::int64_t max_running() const { return 0; }
};

std::unique_ptr<Policy> make_policy(const std::string& name, const PolicyConfig& c);

using PolicyFactory = std::unique_ptr<Policy> (*)(const PolicyConfig& c);
// Each policy registers itself in its own file, also into the "serve_policy" name set.
void register_policy(const std::string& name, const std::string& doc, PolicyFactory make);

}  // namespace sb::serve
