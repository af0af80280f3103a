// Compressed all-gather, reduce-scatter (all-to-all + local fp32 sum) and all-reduce, each
// described as phases (prepare: compress; one plain collective of the wires; after:
// decompress or reduce).
#include "workloads/comm/compressed_collectives.h"

#include "harness/core/check.h"

namespace sb::comm {
namespace {

detail::Span span(const torch::Tensor& t) {
  return {static_cast<const char*>(t.data_ptr()), static_cast<std::size_t>(t.nbytes())};
}

void add(CollectiveStats* s, std::int64_t logical, std::int64_t wire) {
  if (s) s->logical_bytes += logical, s->wire_bytes += wire;
}

void check_gather_output(const torch::Tensor& full, int world, std::int64_t s) {
  SB_CHECK(full.is_contiguous() && full.numel() == world * s,
           "compressed all-gather: the output must be contiguous with {} x {} elements (got {})",
           world, s, full.numel());
}

void check_even(std::int64_t n, int world) {
  SB_CHECK(n % world == 0,
           "compressed reduce-scatter: {} elements do not split evenly over {} ranks; pad the "
           "flat buffer to a multiple of the world size", n, world);
}

// The wire of shard ((s), any float dtype). A cast wire is one cast from the shard's dtype
// (bf16 -> fp16 directly equals bf16 -> fp32 -> fp16: widening is exact); other formats
// compress the shard's fp32 values.
torch::Tensor wire_of(const torch::Tensor& shard, Compressor& c) {
  const auto d = c.cast_dtype();
  if (d == torch::ScalarType::Undefined)
    return c.compress(shard.scalar_type() == torch::kFloat ? shard : shard.to(torch::kFloat));
  SB_CHECK(shard.dim() == 1 && shard.is_floating_point(),
           "{}: a parameter shard is a 1-D float tensor, got {} of shape {}", c.name(),
           c10::toString(shard.scalar_type()), c10::str(shard.sizes()));
  auto wire = torch::empty({c.wire_bytes(shard.numel())}, torch::kUInt8);  // (wire_bytes(s))
  wire_view(wire, 0, shard.numel(), d).copy_(shard);
  return wire;
}

// All-gathers the wire wire() makes (wire_bytes(s) uint8) into the (world * s) tensor dest()
// gives (contiguous, any float dtype). A cast wire of dest's dtype is received straight into
// it (viewed as bytes); another cast wire lands with one cast; other formats are
// decompressed per rank.
CompositePhase gather_phase(Source wire, Source dest, std::int64_t s, const Compressor* c,
                            int world, CollectiveStats* bytes) {
  struct Bufs {
    torch::Tensor wire, all, dest;
    bool direct = false;  // all is dest's bytes
  };
  auto b = std::make_shared<Bufs>();
  const std::int64_t wb = c->wire_bytes(s);
  add(bytes, 4 * s * (world - 1), wb * (world - 1));  // to each other rank
  CompositePhase p;
  p.prepare = [=] {
    b->wire = wire();  // never aliases dest
    b->dest = dest();
    b->direct = c->cast_dtype() == b->dest.scalar_type();
    b->all = b->direct ? b->dest.view(torch::kUInt8)
                       : torch::empty({world * wb}, torch::kUInt8);  // (world * wb)
  };
  p.args = [b] { return CollArgs{CollOp::AllGather, b->wire, b->all}; };
  p.after = [=] {
    const auto d = c->cast_dtype();
    if (b->direct) {
      // received in place
    } else if (d != torch::ScalarType::Undefined) {
      b->dest.copy_(wire_view(b->all, 0, world * s, d));  // the chunks are contiguous: one cast
    } else {
      for (int r = 0; r < world; ++r)
        b->dest.narrow(0, r * s, s).copy_(c->decompress(b->all.narrow(0, r * wb, wb), s));
    }
    *b = Bufs();
  };
  return p;
}

// Reduce-scatters the (world * s) fp32 tensor input() returns: e = input (+ the residual of
// `key` when ef is given) is compressed per destination chunk, one all-to-all of
// wire_bytes(s) per destination, and deliver gets the (s) fp32 sum of the received chunks in
// rank order (topk chunks are added sparsely).
CompositePhase reduce_scatter_phase(Source input, Compressor* c, ErrorFeedback* ef,
                                    const std::string& key, std::int64_t s, int world,
                                    Sink deliver, CollectiveStats* bytes) {
  struct Bufs {
    torch::Tensor send, recv;
  };
  auto b = std::make_shared<Bufs>();
  const std::int64_t wb = c->wire_bytes(s);
  add(bytes, 4 * s * (world - 1), wb * (world - 1));  // one chunk to each other rank
  CompositePhase p;
  p.prepare = [=] {
    const auto full = input();
    check_compress_input(full, "compressed reduce-scatter");
    auto e = ef ? ef->corrected(key, full) : full;              // (world * s)
    b->send = torch::empty({world * wb}, torch::kUInt8);       // chunk q -> rank q
    torch::Tensor sent = ef ? torch::empty({world * s}, torch::kFloat) : torch::Tensor();
    for (int q = 0; q < world; ++q) {
      auto w = c->compress(e.narrow(0, q * s, s).contiguous());
      b->send.narrow(0, q * wb, wb).copy_(w);
      if (ef) sent.narrow(0, q * s, s).copy_(c->decompress(w, s));
    }
    if (ef) ef->keep(key, e, sent);
    b->recv = torch::empty({world * wb}, torch::kUInt8);  // chunk from rank q at q * wb
  };
  p.args = [b] { return CollArgs{CollOp::AllToAll, b->send, b->recv}; };
  p.after = [=] {
    auto out = torch::zeros({s}, torch::kFloat);  // (s), summed in rank order
    for (int q = 0; q < world; ++q) c->decompress_add(b->recv.narrow(0, q * wb, wb), out);
    *b = Bufs();
    deliver(out);
  };
  return p;
}

}  // namespace

CollectiveStats& CollectiveStats::operator+=(const CollectiveStats& o) {
  logical_bytes += o.logical_bytes;
  wire_bytes += o.wire_bytes;
  return *this;
}

void run_on(CompressedOp op, Communicator& comm, Group g, const char* name,
            const std::string& kind) {
  comm.issue(std::move(op.run), g, name, kind, static_cast<std::uint64_t>(op.bytes.logical_bytes),
             static_cast<std::uint64_t>(op.bytes.wire_bytes), /*sync=*/true)
      .wait();
}

std::vector<CompositePhase> all_reduce_phases(Source input, std::int64_t n, Compressor* c,
                                     ErrorFeedback* ef, const std::string& key, int world,
                                     Sink deliver, CollectiveStats* bytes) {
  const std::int64_t padded = (n + world - 1) / world * world, s = padded / world;
  struct State {
    torch::Tensor chunk, all;  // (s) reduced, then (padded) gathered
  };
  auto st = std::make_shared<State>();
  auto padded_input = [input, n, padded] {
    auto x = input();
    check_compress_input(x, "compressed all-reduce");
    return padded == n ? x : torch::constant_pad_nd(x, {0, padded - n});  // (padded)
  };
  auto keep_chunk = [st](const torch::Tensor& chunk) { st->chunk = chunk; };
  // The reduced chunk is compressed again for the all-gather; with error feedback its own
  // residual (key + "/gather") keeps what that second compression dropped.
  auto wire = [st, c, ef, gkey = key + "/gather"] {
    torch::Tensor w;
    if (ef) {
      auto e = ef->corrected(gkey, st->chunk);
      w = c->compress(e);
      ef->keep(gkey, e, c->decompress(w, e.numel()));
    } else {
      w = c->compress(st->chunk);
    }
    st->chunk = torch::Tensor();
    return w;
  };
  auto dest = [st, padded] { return st->all = torch::empty({padded}, torch::kFloat); };
  // Logical bytes: the unpadded n, as the plain all-reduce of the same buffer counts them;
  // the wire carries the padding.
  CollectiveStats inner;
  CompositePhase gather = gather_phase(wire, dest, s, c, world, &inner);
  gather.after = [after = gather.after, st, n, padded, deliver] {
    after();
    auto all = std::move(st->all);
    deliver(padded == n ? all : all.narrow(0, 0, n).contiguous());
  };
  CompositePhase scatter = reduce_scatter_phase(padded_input, c, ef, key, s, world, keep_chunk, &inner);
  add(bytes, static_cast<std::int64_t>(wire_bytes("all_reduce", 4 * n, world)), inner.wire_bytes);
  return {std::move(scatter), std::move(gather)};
}

// ---- blocking, on a group of a communicator ------------------------------------------------
void compressed_all_gather_into(const torch::Tensor& shard, const torch::Tensor& full,
                                Compressor& c, Communicator& comm, Group g,
                                CollectiveStats* stats) {
  const int world = comm.size(g);
  check_gather_output(full, world, shard.numel());
  CompressedOp op;
  op.run.phases = {gather_phase([shard, &c] { return wire_of(shard, c); }, [full] { return full; },
                                shard.numel(), &c, world, &op.bytes)};
  op.run.reads = span(shard), op.run.writes = span(full);
  if (stats) *stats += op.bytes;
  run_on(std::move(op), comm, g, "all_gather");
}

torch::Tensor compressed_all_gather(const torch::Tensor& shard, Compressor& c,
                                    Communicator& comm, Group g, CollectiveStats* stats) {
  auto out = torch::empty({comm.size(g) * shard.numel()}, torch::kFloat);  // (world * s)
  compressed_all_gather_into(shard, out, c, comm, g, stats);
  return out;
}

torch::Tensor compressed_reduce_scatter(const torch::Tensor& full, Compressor& c,
                                        Communicator& comm, Group g, CollectiveStats* stats,
                                        ErrorFeedback* ef, const std::string& key) {
  const int world = comm.size(g);
  check_even(full.numel(), world);
  torch::Tensor out;
  CompressedOp op;
  op.run.phases = {reduce_scatter_phase([full] { return full; }, &c, ef, key,
                                        full.numel() / world, world,
                                        [&out](const torch::Tensor& r) { out = r; }, &op.bytes)};
  op.run.reads = span(full);
  if (stats) *stats += op.bytes;
  run_on(std::move(op), comm, g, "reduce_scatter");
  return out;
}

torch::Tensor compressed_all_reduce(const torch::Tensor& x, Compressor& c, Communicator& comm,
                                    Group g, CollectiveStats* stats, ErrorFeedback* ef,
                                    const std::string& key, const std::string& kind) {
  torch::Tensor out;
  CompressedOp op;
  op.run.phases = all_reduce_phases([x] { return x; }, x.numel(), &c, ef, key, comm.size(g),
                                    [&out](const torch::Tensor& r) { out = r; }, &op.bytes);
  op.run.reads = span(x);
  if (stats) *stats += op.bytes;
  run_on(std::move(op), comm, g, "all_reduce", kind);
  return out;
}

// ---- CompressedCollectives ----------------------------------------------------------------
namespace {
std::unique_ptr<Compressor> make_for(CompressorConfig cfg, int rank) {
  // Ranks must round independently (else their rounding errors correlate and add up).
  cfg.seed = cfg.seed * 1000003ULL + static_cast<std::uint64_t>(rank);
  return make_compressor(cfg);
}
}  // namespace

CompressedCollectives::CompressedCollectives(const Policy& policy, int rank) : policy_(policy) {
  param_ = make_for(policy.param_all_gather, rank);
  grad_ = make_for(policy.grad_reduce_scatter, rank);
  const auto& ar = policy.grad_all_reduce;
  const CompressorInfo& info = compressor_info(ar.name);
  if (info.form == CompressorForm::WholeAllReduce) {
    // Same seed on every rank: its result (PowerSGD's initial Q) must be identical everywhere.
    whole_ = info.make_all_reduce(ar);
  } else {
    allreduce_ = make_for(ar, rank);
  }
}

CompressedOp CompressedCollectives::all_gather_params_op(const torch::Tensor& shard,
                                                         const torch::Tensor& full, int world) {
  check_gather_output(full, world, shard.numel());
  // The compressor sees the parameters as the ranks compute with them: rounded once to
  // full's dtype. A cast wire of that dtype is that rounding itself; any other wire gets the
  // rounded values (bit-identical to casting on the caller, then compressing).
  const auto pd = full.scalar_type();
  const bool as_is = shard.scalar_type() == pd || param_->cast_dtype() == pd;
  Compressor* c = param_.get();
  auto wire = [shard, pd, as_is, c] { return wire_of(as_is ? shard : shard.to(pd), *c); };
  CompressedOp op;
  op.run.phases = {gather_phase(wire, [full] { return full; }, shard.numel(), c, world, &op.bytes)};
  op.run.reads = span(shard), op.run.writes = span(full);
  return op;
}

CompressedOp CompressedCollectives::reduce_scatter_grads_op(const std::string& key,
                                                            const torch::Tensor& full,
                                                            const torch::Tensor& shard,
                                                            int world) {
  check_even(full.numel(), world);
  const std::int64_t s = full.numel() / world;
  SB_CHECK(shard.numel() == s, "compressed reduce-scatter: the shard has {} elements, expected "
           "{} / {} ranks", shard.numel(), full.numel(), world);
  ErrorFeedback* ef = policy_.grad_reduce_scatter.error_feedback ? &grad_ef_ : nullptr;
  CompressedOp op;
  op.run.phases = {reduce_scatter_phase([full] { return full.to(torch::kFloat32); }, grad_.get(),
                                        ef, key, s, world,
                                        [shard](const torch::Tensor& r) { shard.copy_(r); },
                                        &op.bytes)};
  op.run.reads = span(full), op.run.writes = span(shard);
  return op;
}

CompressedOp CompressedCollectives::all_reduce_grads_op(const std::string& key,
                                                        const torch::Tensor& t, int world) {
  Source in = [t] { return t.to(torch::kFloat32); };
  Sink out = [t](const torch::Tensor& r) { t.copy_(r); };
  CompressedOp op;
  if (whole_) {
    op.run.phases = whole_->all_reduce_phases(key, in, t.numel(), world, out, &op.bytes);
  } else {
    ErrorFeedback* ef = policy_.grad_all_reduce.error_feedback ? &allreduce_ef_ : nullptr;
    op.run.phases =
        all_reduce_phases(in, t.numel(), allreduce_.get(), ef, key, world, out, &op.bytes);
  }
  op.run.reads = op.run.writes = span(t);
  return op;
}

torch::Tensor CompressedCollectives::reduce_scatter_grads(const std::string& key,
                                                          const torch::Tensor& full,
                                                          Communicator& comm, Group g,
                                                          CollectiveStats* stats) {
  const int world = comm.size(g);
  check_even(full.numel(), world);
  auto out = torch::empty({full.numel() / world}, torch::kFloat);  // (s)
  auto op = reduce_scatter_grads_op(key, full, out, world);
  if (stats) *stats += op.bytes;
  run_on(std::move(op), comm, g, "reduce_scatter", kind_name(CollectiveKind::GradReduceScatter));
  return out;
}

torch::Tensor CompressedCollectives::all_reduce_grads(const std::string& key, const torch::Tensor& x,
                                                      Communicator& comm, Group g,
                                                      CollectiveStats* stats) {
  auto io = x.to(torch::kFloat32, /*non_blocking=*/false, /*copy=*/true);  // (n), reduced in place
  auto op = all_reduce_grads_op(key, io, comm.size(g));
  if (stats) *stats += op.bytes;
  run_on(std::move(op), comm, g, "all_reduce", kind_name(CollectiveKind::GradAllReduce));
  return io;
}

std::int64_t CompressedCollectives::state_bytes() const {
  return grad_ef_.residual_bytes() + allreduce_ef_.residual_bytes() +
         (whole_ ? whole_->state_bytes() : 0);
}

std::int64_t CompressedCollectives::state_bytes_of(const Policy& p, CollectiveKind k,
                                                   std::int64_t n, int world) {
  const CompressorConfig& c = p[k];
  if (k == CollectiveKind::ParamAllGather || !p.compresses(k)) return 0;
  const CompressorInfo& info = compressor_info(c.name);
  if (info.form == CompressorForm::WholeAllReduce) return info.state_bytes(c, n);
  if (!c.error_feedback) return 0;
  if (k == CollectiveKind::GradReduceScatter) return 4 * n;
  const std::int64_t padded = (n + world - 1) / world * world;
  return 4 * padded + 4 * (padded / world);
}

std::int64_t CompressedCollectives::wire_bytes_of(const Policy& p, CollectiveKind k,
                                                  std::int64_t n, int world,
                                                  std::int64_t elt_bytes) {
  if (world <= 1) return 0;
  const auto w = static_cast<std::int64_t>(world);
  if (!p.compresses(k)) {
    const char* op = k == CollectiveKind::ParamAllGather      ? "all_gather"
                     : k == CollectiveKind::GradReduceScatter ? "reduce_scatter"
                                                              : "all_reduce";
    return static_cast<std::int64_t>(wire_bytes(op, static_cast<std::uint64_t>(elt_bytes * n), world));
  }
  const CompressorConfig& c = p[k];
  const CompressorInfo& info = compressor_info(c.name);
  if (info.form == CompressorForm::WholeAllReduce) return info.wire_bytes(c, n, world);
  const auto compressor = make_compressor(c);
  if (k == CollectiveKind::GradAllReduce) return 2 * (w - 1) * compressor->wire_bytes((n + w - 1) / w);
  SB_CHECK(n % w == 0, "{} of {} elements over {} ranks: not a whole shard each", kind_name(k), n,
           world);
  return (w - 1) * compressor->wire_bytes(n / w);
}

StateDict CompressedCollectives::state() const {
  StateDict s;
  param_->save_state(s, "param/");
  grad_->save_state(s, "grad/");
  if (allreduce_) allreduce_->save_state(s, "allreduce/");
  grad_ef_.save_state(s, "grad_ef/");
  allreduce_ef_.save_state(s, "allreduce_ef/");
  if (whole_) whole_->save_state(s, whole_prefix());
  return s;
}

void CompressedCollectives::load_state(const StateDict& s) {
  std::vector<std::string> known = {"param/", "grad/", "allreduce/", "grad_ef/", "allreduce_ef/"};
  if (whole_) known.push_back(whole_prefix());
  for (const auto& [name, t] : s) {
    bool ok = false;
    for (const auto& k : known) ok = ok || name.rfind(k, 0) == 0;
    SB_CHECK(ok, "compression state entry \"{}\" belongs to no part of policy {}; the state "
             "was saved by another version", name, policy_.describe());
  }
  param_->load_state(s, "param/");
  grad_->load_state(s, "grad/");
  if (allreduce_) allreduce_->load_state(s, "allreduce/");
  grad_ef_.load_state(s, "grad_ef/");
  allreduce_ef_.load_state(s, "allreduce_ef/");
  if (whole_) whole_->load_state(s, whole_prefix());
}

}  // namespace sb::comm
