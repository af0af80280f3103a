// The backend registry (backend.h) and the names shared by every backend.
#include "workloads/comm/backend.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/core/check.h"
#include "harness/workload.h"

namespace sb::comm {

const char* group_name(Group g) {
  switch (g) {
    case Group::World: return "world";
    case Group::Shard: return "shard";
    case Group::Replica: return "replica";
    case Group::Tp: return "tp";
    case Group::Pp: return "pp";
    case Group::Sp: return "sp";
    case Group::Ep: return "ep";
    case Group::Edp: return "edp";
  }
  return "?";
}

const char* group_dim(Group g) {
  switch (g) {
    case Group::World: return "world";
    case Group::Shard: return "dp_shard";
    case Group::Replica: return "dp_replicate";
    default: return group_name(g);
  }
}

const char* coll_name(CollOp op) {
  switch (op) {
    case CollOp::AllGather: return "all_gather";
    case CollOp::ReduceScatter: return "reduce_scatter";
    case CollOp::AllReduce: return "all_reduce";
    case CollOp::Broadcast: return "broadcast";
    case CollOp::AllToAll: return "all_to_all";
  }
  return "?";
}

const char* p2p_name(P2POp op) { return op == P2POp::Send ? "send" : "recv"; }

CollOp coll_from_name(const std::string& name) {
  std::vector<std::string> known;
  for (CollOp op : kCollOps) {
    if (name == coll_name(op)) return op;
    known.push_back(coll_name(op));
  }
  SB_FAIL("unknown collective \"{}\"; known: {}", name, fmt::join(known, ", "));
}

namespace {
std::vector<BackendInfo>& registry() {
  static std::vector<BackendInfo> r;
  return r;
}
}  // namespace

void register_backend(BackendInfo info) {
  SB_CHECK(!find_backend(info.name), "backend \"{}\" registered twice", info.name);
  sb::register_name("comm_backend", info.name, info.doc);
  registry().push_back(std::move(info));
}

const BackendInfo* find_backend(const std::string& name) {
  for (const auto& b : registry())
    if (b.name == name) return &b;
  return nullptr;
}

const std::vector<BackendInfo>& backends() { return registry(); }

std::unique_ptr<Backend> make_backend(const std::string& name, const GroupComms& groups) {
  const BackendInfo* b = find_backend(name);
  if (!b) {
    std::vector<std::string> known;
    for (const auto& i : registry()) known.push_back(i.name);
    std::sort(known.begin(), known.end());  // registration order is static-init order
    SB_FAIL("comm_backend: unknown backend \"{}\"; known: {}", name, fmt::join(known, ", "));
  }
  SB_CHECK(b->available, "comm_backend = \"{}\": {}", name, b->unavailable_why);
  return b->make(groups);
}

}  // namespace sb::comm
