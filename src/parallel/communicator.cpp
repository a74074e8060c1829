#include "parallel/communicator.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/error.h"

namespace nemotron::parallel {

void check_chunked(const Tensor& in, const Tensor& out, int size, const char* what) {
  NM_CHECK(in.defined() && out.defined(), "{}: undefined tensor", what);
  NM_CHECK(in.dtype() == out.dtype(), "{}: dtypes {} and {}", what, dtype_name(in.dtype()), dtype_name(out.dtype()));
  NM_CHECK(in.device() == out.device(), "{}: tensors on {} and {}", what, in.device().str(), out.device().str());
  const bool gather = std::string(what) == "all_gather";
  const int64_t small = gather ? in.numel() : out.numel(), big = gather ? out.numel() : in.numel();
  NM_CHECK(big == small * size, "{}: {} elements for {} members of {} elements", what, big, size, small);
}

void check_counts(const Tensor& in, const std::vector<int64_t>& send_counts, const Tensor& out,
                  const std::vector<int64_t>& recv_counts, int size) {
  NM_CHECK(in.dtype() == out.dtype(), "all_to_all_v: dtypes {} and {}", dtype_name(in.dtype()),
           dtype_name(out.dtype()));
  NM_CHECK(static_cast<int>(send_counts.size()) == size && static_cast<int>(recv_counts.size()) == size,
           "all_to_all_v: {} send and {} receive counts for {} members", send_counts.size(), recv_counts.size(), size);
  const int64_t sent = std::accumulate(send_counts.begin(), send_counts.end(), int64_t{0});
  const int64_t got = std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0});
  NM_CHECK(sent <= in.numel() && got <= out.numel(), "all_to_all_v: sends {} of {}, receives {} into {}", sent,
           in.numel(), got, out.numel());
}

namespace {
void copy_prefix(const Tensor& in, Tensor& out, int64_t elements) {
  if (elements == 0) return;
  Tensor src = in.view({in.numel()}).slice(0, elements), dst = out.view({out.numel()}).slice(0, elements);
  dst.copy_from(src);
}
}  // namespace

void SelfCommunicator::reduce_scatter(const Tensor& in, Tensor& out, ReduceOp) {
  check_chunked(in, out, 1, "reduce_scatter");
  copy_prefix(in, out, in.numel());
}

void SelfCommunicator::all_gather(const Tensor& in, Tensor& out) {
  check_chunked(in, out, 1, "all_gather");
  copy_prefix(in, out, in.numel());
}

void SelfCommunicator::all_to_all_v(const Tensor& in, const std::vector<int64_t>& send_counts, Tensor& out,
                                    const std::vector<int64_t>& recv_counts) {
  check_counts(in, send_counts, out, recv_counts, 1);
  NM_CHECK(send_counts[0] == recv_counts[0], "all_to_all_v: a group of one sends {} and receives {}", send_counts[0],
           recv_counts[0]);
  copy_prefix(in, out, send_counts[0]);
}

void SelfCommunicator::broadcast(Tensor&, int root) { NM_CHECK(root == 0, "broadcast from {} in a group of one", root); }

void broadcast_text(Communicator& c, std::string& text, int root) {
  if (c.size() == 1) return;
  Tensor n = Tensor::from_vector<int64_t>({1}, {static_cast<int64_t>(text.size())});
  c.broadcast(n, root);
  const int64_t bytes = n.data<int64_t>()[0];
  // Whole int32 words (the tensor dtypes have no byte type); the tail word's padding is ignored.
  Tensor words = Tensor::zeros({std::max<int64_t>((bytes + 3) / 4, 1)}, DType::i32);
  if (c.rank() == root) std::memcpy(words.raw(), text.data(), static_cast<size_t>(bytes));
  c.broadcast(words, root);
  text.assign(static_cast<const char*>(words.raw()), static_cast<size_t>(bytes));
}

std::vector<std::string> gather_text(Communicator& c, const std::string& text, int root) {
  const int R = c.size();
  if (R == 1) return {text};
  Tensor mine = Tensor::from_vector<int64_t>({1}, {static_cast<int64_t>(text.size())});
  Tensor sizes = Tensor::zeros({R}, DType::i64);
  c.all_gather(mine, sizes);
  const int64_t* bytes = sizes.data<int64_t>();
  auto words = [](int64_t n) { return (n + 3) / 4; };  // whole int32 words, as broadcast_text sends
  // Every member sends its words to the root alone; the root receives each member's in rank order.
  std::vector<int64_t> send(static_cast<size_t>(R), 0), recv(static_cast<size_t>(R), 0);
  send[static_cast<size_t>(root)] = words(static_cast<int64_t>(text.size()));
  int64_t total = 0;
  if (c.rank() == root)
    for (int r = 0; r < R; ++r) total += recv[static_cast<size_t>(r)] = words(bytes[r]);
  Tensor in = Tensor::zeros({std::max<int64_t>(send[static_cast<size_t>(root)], 1)}, DType::i32);
  std::memcpy(in.raw(), text.data(), text.size());
  Tensor out = Tensor::zeros({std::max<int64_t>(total, 1)}, DType::i32);
  c.all_to_all_v(in, send, out, recv);
  std::vector<std::string> texts;
  if (c.rank() != root) return texts;
  const char* at = static_cast<const char*>(out.raw());
  for (int r = 0; r < R; ++r) {
    texts.emplace_back(at, static_cast<size_t>(bytes[r]));
    at += 4 * recv[static_cast<size_t>(r)];
  }
  return texts;
}

}  // namespace nemotron::parallel
