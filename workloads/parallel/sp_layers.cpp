// The sp all-to-all as an autograd function (sp_layers.h).
#include "workloads/parallel/sp_layers.h"

#include "workloads/comm/communicator.h"
#include "workloads/parallel/all_to_all.h"

namespace sb::parallel {

torch::Tensor all_to_all_sp(const torch::Tensor& blocks, comm::Communicator& c) {
  return all_to_all_blocks(blocks, c, comm::Group::Sp, "sp_act", "sp_grad");
}

models::SequenceParallel sequence_parallel(comm::Communicator& c) {
  models::SequenceParallel sp;
  sp.rank = c.rank(comm::Group::Sp);
  sp.size = c.size(comm::Group::Sp);
  comm::Communicator* cp = &c;
  sp.all_to_all = [cp](const torch::Tensor& t) { return all_to_all_sp(t, *cp); };
  return sp;
}

}  // namespace sb::parallel
