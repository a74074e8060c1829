#include "parallel/process_groups.h"

#include "core/backend.h"
#include "core/error.h"
#include "parallel/mpi_communicator.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "parallel/nccl_communicator.h"
#endif

namespace nemotron::parallel {

std::shared_ptr<const ProcessGroups> ProcessGroups::single() {
  auto g = std::make_shared<ProcessGroups>();
  auto self = std::make_shared<SelfCommunicator>();
  g->world = g->data = g->expert = g->expert_data = g->tensor = g->context = g->data_context = self;
  return g;
}

const ProcessGroups& groups_of(const Context& ctx) {
  static const std::shared_ptr<const ProcessGroups> one = ProcessGroups::single();
  return ctx.groups ? *ctx.groups : *one;
}

std::shared_ptr<const ProcessGroups> ProcessGroups::create(const RankLayout& layout, const MpiCommunicator* world_comm,
                                                           Backend* device) {
  if (layout.world() == 1) {
    auto g = std::const_pointer_cast<ProcessGroups>(single());
    g->layout = layout;
    return g;
  }
  NM_CHECK(world_comm != nullptr && world_comm->size() == layout.world(), "a layout of {} ranks without its world",
           layout.world());
  auto g = std::make_shared<ProcessGroups>();
  g->layout = layout;
  g->world_rank = world_comm->rank();
  const bool on_gpu = device != nullptr && device->device().is_cuda();
#if !NEMOTRON_CUDA
  NM_CHECK(!on_gpu, "a CUDA device in a build without CUDA");
#endif
  // Every rank splits the world once per kind (MPI_Comm_split is collective over the parent);
  // groups of one become SelfCommunicators.
  auto make = [&](const std::vector<int>& members) -> std::shared_ptr<Communicator> {
    std::unique_ptr<MpiCommunicator> host = world_comm->split(members);
    if (host->size() == 1) return std::make_shared<SelfCommunicator>();
#if NEMOTRON_CUDA
    if (on_gpu) return std::make_shared<NcclCommunicator>(std::move(host), static_cast<cuda::CudaBackend&>(*device));
#endif
    return std::shared_ptr<Communicator>(std::move(host));
  };
  std::vector<int> everyone(static_cast<size_t>(layout.world()));
  for (int r = 0; r < layout.world(); ++r) everyone[static_cast<size_t>(r)] = r;
  const int me = g->world_rank;
  g->world = make(everyone);
  g->data = make(layout.data_group(me));
  g->expert = make(layout.expert_group(me));
  g->expert_data = make(layout.expert_data_group(me));
  g->tensor = make(layout.tensor_group(me));
  g->context = make(layout.context_group(me));
  // Without context parallelism the data group is the same set of ranks: one communicator.
  g->data_context = layout.context() == 1 ? g->data : make(layout.data_context_group(me));
  return g;
}

}  // namespace nemotron::parallel
