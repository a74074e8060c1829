// The process groups of a run, built once from its RankLayout and carried in the Context
// (ctx.groups): world, data (gradients averaged), expert (experts split, tokens exchanged),
// expert_data (an expert's replicas), tensor, context (sequences split, model/context_split.h) and
// data_context (data x context: the replicas of a whole parameter). A group of one
// is a SelfCommunicator, so a single-process run is this same code with every size 1.
#pragma once
#include <memory>

#include "core/context.h"
#include "parallel/communicator.h"
#include "parallel/rank_layout.h"

namespace nemotron::parallel {

class MpiCommunicator;

struct ProcessGroups {
  RankLayout layout;
  int world_rank = 0;
  std::shared_ptr<Communicator> world, data, expert, expert_data, tensor, context, data_context;

  RankCoords coords() const { return layout.coords(world_rank); }
  bool is_first_rank() const { return world_rank == 0; }  // logs, metrics, the commit of a save
  bool distributed() const { return layout.world() > 1; }

  // Every group of one process.
  static std::shared_ptr<const ProcessGroups> single();
  // The groups of `layout` over the launcher's world (`world_comm`; null only when the layout has
  // one rank). Collective: every rank calls it. With a CUDA `device` the groups run NCCL on its
  // stream (host values still over MPI); otherwise MPI on host tensors.
  static std::shared_ptr<const ProcessGroups> create(const RankLayout& layout, const MpiCommunicator* world_comm,
                                                     Backend* device);
};

// ctx.groups, or the groups of one process when it has none.
const ProcessGroups& groups_of(const Context& ctx);

}  // namespace nemotron::parallel
