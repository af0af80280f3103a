// Error feedback residuals, keyed per buffer.
#include "workloads/comm/error_feedback.h"

#include "harness/core/check.h"

namespace sb::comm {

torch::Tensor ErrorFeedback::corrected(const std::string& key, const torch::Tensor& x) const {
  check_compress_input(x, "error feedback");
  auto it = residual_.find(key);
  if (it == residual_.end()) return x.clone();
  SB_CHECK(it->second.numel() == x.numel(),
           "error feedback buffer \"{}\" had {} elements and now has {}; each key must name one "
           "buffer of fixed size (use a distinct key per buffer)",
           key, it->second.numel(), x.numel());
  return x + it->second;
}

void ErrorFeedback::keep(const std::string& key, const torch::Tensor& e, const torch::Tensor& sent) {
  SB_CHECK(e.numel() == sent.numel(), "error feedback \"{}\": e has {} elements, sent has {}", key,
           e.numel(), sent.numel());
  auto& r = residual_[key];
  if (r.defined() && r.numel() == e.numel()) {
    torch::sub_out(r, e, sent);  // reuse the residual's storage
  } else {
    r = e - sent;
  }
}

torch::Tensor ErrorFeedback::compress(Compressor& c, const std::string& key, const torch::Tensor& x) {
  auto e = corrected(key, x);
  auto wire = c.compress(e);
  keep(key, e, c.decompress(wire, e.numel()));
  return wire;
}

torch::Tensor ErrorFeedback::residual(const std::string& key) const {
  auto it = residual_.find(key);
  return it == residual_.end() ? torch::Tensor() : it->second;
}

void ErrorFeedback::save_state(StateDict& out, const std::string& prefix) const {
  for (const auto& [k, r] : residual_) out[prefix + k] = r;
}

void ErrorFeedback::load_state(const StateDict& in, const std::string& prefix) {
  residual_.clear();
  for (const auto& [k, r] : state_with_prefix(in, prefix)) {
    SB_CHECK(r.scalar_type() == torch::kFloat && r.dim() == 1,
             "error feedback state \"{}{}\" is {} of shape {}, expected a 1-D fp32 residual",
             prefix, k, c10::toString(r.scalar_type()), c10::str(r.sizes()));
    residual_[k] = r.clone();
  }
}

std::int64_t ErrorFeedback::residual_bytes() const {
  std::int64_t b = 0;
  for (const auto& [k, r] : residual_) b += r.numel() * 4;
  return b;
}

}  // namespace sb::comm
