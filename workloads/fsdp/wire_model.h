// The bytes a strategy puts on the wire in one step, per kind of collective, from its record
// (docs/COMPRESSION.md "Wire bytes of one step"): for every collective of the record on every
// unit, what comm::CompressedCollectives::wire_bytes_of gives for its elements, group and
// payload under the compression policy. tests/mpi/comm_wire_bytes.cpp holds every registered
// strategy's traced bytes to it.
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include <torch/types.h>

#include "workloads/comm/policy.h"
#include "workloads/fsdp/strategy.h"
#include "workloads/models/model.h"

namespace sb::fsdp {

// Bytes this rank hands to the communication library in one steady-state step, by kind (every
// kind present, 0 when not issued). acquires[u]: how often the model acquires unit u in one
// forward; a unit acquired more than once stays gathered from its forward to its backward
// (no backward re-gather from the second step on).
std::map<comm::CollectiveKind, std::uint64_t> step_wire_bytes(
    const StrategyInfo& s, const std::vector<models::UnitSpec>& units,
    const std::vector<int>& acquires, const DpMesh& mesh, torch::ScalarType param_dtype,
    torch::ScalarType reduce_dtype, const comm::Policy& policy);

}  // namespace sb::fsdp
