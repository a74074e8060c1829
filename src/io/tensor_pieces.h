// Pieces of global tensors in per-rank safetensors files: the storage of sharded checkpoints
// (Megatron's dist_checkpointing role; STYLE lesson 6). Each rank writes the pieces it owns into a
// file of its own; a piece says which part of which global tensor it holds, so a reader at any
// other parallel layout assembles what it needs by intersecting, and nothing is gathered to write.
//   A piece of tensor `name` (global shape G) is the box [offset, offset + box) of G and, of that
//   box, the row-major flat elements [begin, end): the whole box, or a contiguous range of it
//   where a distributed optimizer (ZeRO) cut its state into per-rank ranges.
//   Each file's __metadata__["nemotron.pieces"] is a JSON list, one object per stored tensor:
//   {"key", "name", "part", "global_shape", "offset", "box", "begin", "end", "replicas"}.
// Every element is stored exactly once across the files, so a read counts what it filled: too
// few is an InputError naming the tensor (a rank file of another run, or one lost).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace nemotron::io {

struct TensorPiece {
  std::string name;               // the tensor's checkpoint name (Hub name; "exp_avg.<name>", ...)
  std::string part = "model";     // which whole-tensor file it stands for: "model" | "optimizer"
  std::string replicas = "data";  // ParamReplicas of the parameter: "data" | "expert_data"
  Shape global_shape;
  std::vector<int64_t> offset;    // per dim; empty: zeros
  Shape box;                      // empty rank with a non-empty global_shape: the whole tensor
  int64_t begin = 0, end = -1;    // flat elements of the box; end -1: the whole box
  Tensor data;                    // end - begin elements (any shape of that size, any device)
};

// Writes `pieces` to `path` (atomically, fsynced). Keys inside the file are made unique from the
// name and the piece's place.
void save_piece_file(const std::string& path, const std::vector<TensorPiece>& pieces);

class PieceSet {
 public:
  // The rank files of one checkpoint; `source` (the iteration directory) names it in errors.
  static PieceSet open(const std::vector<std::string>& paths, const std::string& source);
  // Names of the tensors of `part`, sorted.
  std::vector<std::string> names(const std::string& part) const;
  bool contains(const std::string& name) const { return index_.count(name) > 0; }
  const Shape& global_shape(const std::string& name) const;
  const std::string& replicas(const std::string& name) const;
  // Flat elements [begin, end) (end -1: all) of the box [offset, offset + box) of `name`, read in
  // dtype `as` on the host as a 1-D tensor. InputError naming the source and the tensor when it is
  // absent, its global shape is not `global_shape`, or some of the elements are in no piece.
  Tensor read(const std::string& name, const Shape& global_shape, const std::vector<int64_t>& offset, const Shape& box,
              DType as, int64_t begin = 0, int64_t end = -1) const;
  // The whole tensor in its global shape, in `as` (default: the dtype it is stored in).
  Tensor read_whole(const std::string& name, std::optional<DType> as = std::nullopt) const;
  // Every whole tensor of `part` as one safetensors file in memory, for readers that take whole
  // tensors (convert export, generate, serve, eval, model info). Peak memory: that file plus one tensor.
  SafetensorsFile gather(const std::string& part) const;

 private:
  struct Entry {
    size_t file;
    std::string key;
    TensorPiece meta;  // without data
  };
  std::string source_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, std::vector<Entry>> index_;
  const std::vector<Entry>& entries(const std::string& name) const;
};

// The whole weights of a checkpoint directory: its model.safetensors (or index), or for a sharded
// training iteration (io/checkpoint_layout.h rank_files) its "model" part assembled in memory.
SafetensorsSet open_weight_set(const std::string& dir);

}  // namespace nemotron::io
