#include "model/param.h"

#include <algorithm>
#include <thread>

namespace nemotron::model {

Param& ParamStore::add(const std::string& name, Shape shape, bool weight_decay, bool stat) {
  NM_CHECK(!by_name_.count(name), "parameter {} registered twice", name);
  auto p = std::make_unique<Param>();
  p->name = name;
  const DType vt = stat ? stat_dtype(dtype_) : dtype_;
  p->value = Tensor::zeros(shape, vt, *backend_);
  if (trainable_) {
    if (!defer_grads_) p->grad = Tensor::zeros(shape, grad_dtype(vt), *backend_);
  } else
    p->requires_grad = false;
  p->weight_decay = weight_decay;
  Param& ref = *p;
  order_.push_back(p.get());
  by_name_[name] = std::move(p);
  return ref;
}

Param& ParamStore::get(const std::string& name) {
  auto it = by_name_.find(name);
  NM_CHECK(it != by_name_.end(), "no parameter named {}", name);
  return *it->second;
}

const Param* ParamStore::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second.get();
}

void ParamStore::zero_grads() {
  if (grad_buffer_.defined()) grad_buffer_.zero_();
  for (Param* p : order_)
    if (p->grad.defined() && !in_grad_buffer(*p)) p->grad.zero_();
}

GradLayout ParamStore::grad_layout(int64_t align, int64_t pad_to) const {
  NM_CHECK(align >= 1 && pad_to >= 1, "grad_layout({}, {})", align, pad_to);
  auto round_up = [](int64_t n, int64_t m) { return (n + m - 1) / m * m; };
  GradLayout l;
  l.dtype = grad_dtype(dtype_);
  l.offset.assign(order_.size(), -1);
  int64_t total = 0;
  for (size_t i = 0; i < order_.size(); ++i) {
    const Param* p = order_[i];
    if (!p->requires_grad || p->is_expert()) continue;
    const DType dt = grad_dtype(p->value.dtype());
    NM_CHECK(dt == l.dtype, "gradient of {} is {}, the store's are {}", p->name, dtype_name(dt), dtype_name(l.dtype));
    l.offset[i] = total;
    total += round_up(p->value.numel(), align);
  }
  l.numel = round_up(std::max<int64_t>(total, 1), pad_to);
  return l;
}

void ParamStore::allocate_grads() {
  for (Param* p : order_)
    if (p->requires_grad && !p->grad.defined())
      p->grad = Tensor::zeros(p->value.shape(), grad_dtype(p->value.dtype()), *backend_);
}

void ParamStore::make_grads_contiguous(int64_t align, int64_t pad_to) {
  const GradLayout l = grad_layout(align, pad_to);
  // The old gradients are freed before the buffer is allocated: no second copy at the peak.
  for (size_t i = 0; i < order_.size(); ++i)
    if (l.offset[i] >= 0) order_[i]->grad = Tensor();
  grad_buffer_ = Tensor();
  Tensor buf = Tensor::zeros({l.numel}, l.dtype, *backend_);
  for (size_t i = 0; i < order_.size(); ++i) {
    if (l.offset[i] < 0) continue;
    Param* p = order_[i];
    p->grad = buf.slice(l.offset[i], l.offset[i] + p->value.numel()).view(p->value.shape());
  }
  grad_buffer_ = buf;
  allocate_grads();  // deferred ones outside the buffer (expert-parallel experts)
}

bool ParamStore::in_grad_buffer(const Param& p) const {
  if (!grad_buffer_.defined() || !p.grad.defined()) return false;
  const char* b = static_cast<const char*>(grad_buffer_.raw());
  const char* g = static_cast<const char*>(p.grad.raw());
  return g >= b && g < b + grad_buffer_.nbytes();
}

void ParamStore::set_requires_grad(Param& p, bool requires_grad) {
  NM_CHECK(find(p.name) == &p, "set_requires_grad: {} is not a parameter of this store", p.name);
  p.requires_grad = requires_grad;
  if (!requires_grad) {
    p.grad = Tensor();
    p.master = Tensor();
    return;
  }
  if (!p.grad.defined()) p.grad = Tensor::zeros(p.value.shape(), grad_dtype(p.value.dtype()), *backend_);
  if (masters_ && !masters_deferred_ && p.value.dtype() == DType::bf16 && !p.master.defined())
    p.master = p.value.to_host(DType::f32).to(*backend_);
}

void ParamStore::create_masters() {
  masters_ = true;
  masters_deferred_ = false;
  for (Param* p : order_)
    if (p->requires_grad && p->value.dtype() == DType::bf16 && !p->master.defined())
      p->master = p->value.to_host(DType::f32).to(*backend_);
}

bool ParamStore::has_masters() const {
  for (const Param* p : order_)
    if (p->master.defined()) return true;
  return false;
}

void Param::refresh_value() {
  if (master.defined()) value.copy_from(master.to_host(value.dtype()));
}

int64_t ParamStore::numel() const {
  int64_t n = 0;
  for (const Param* p : order_) n += p->value.numel();
  return n;
}

int64_t ParamStore::trainable_numel() const {
  int64_t n = 0;
  for (const Param* p : order_) n += p->requires_grad ? p->value.numel() : 0;
  return n;
}

Tensor grad_sink(Context& ctx, Param& p) {
  return p.requires_grad ? p.grad : ctx.zeros(p.value.shape(), grad_dtype(p.value.dtype()));
}

uint64_t name_stream(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::vector<ParamBox> Param::boxes() const {
  if (shard.row_blocks.empty()) return {ParamBox{0, value.shape(), global_offset()}};
  std::vector<ParamBox> out;
  for (const ShardRowBlock& b : shard.row_blocks) {
    std::vector<int64_t> box = value.shape().dims(), offset(value.rank(), 0);
    box[0] = b.rows;
    offset[0] = b.global_row;
    out.push_back(ParamBox{b.local_row, Shape(box), offset});
  }
  return out;
}

std::vector<int64_t> Param::global_indices() const {
  const Shape g = global_shape();
  const int64_t n = value.numel(), rank = value.rank();
  std::vector<int64_t> out(static_cast<size_t>(n));
  std::vector<int64_t> gstride(static_cast<size_t>(rank), 1);
  for (int64_t d = rank - 2; d >= 0; --d) gstride[d] = gstride[d + 1] * g[d + 1];
  for (const ParamBox& b : boxes()) {
    const int64_t box_n = b.box.numel();
    const int64_t first = b.local_row * (rank ? value.numel() / std::max<int64_t>(1, value.dim(0)) : 1);
    std::vector<int64_t> idx(static_cast<size_t>(rank), 0);  // position inside the box
    for (int64_t k = 0; k < box_n; ++k) {
      int64_t gi = 0;
      for (int64_t d = 0; d < rank; ++d) gi += (b.offset[d] + idx[d]) * gstride[d];
      out[static_cast<size_t>(first + k)] = gi;
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++idx[d] < b.box[d]) break;
        idx[d] = 0;
      }
    }
  }
  return out;
}

namespace {

// Element k of a split parameter takes the value its global index has in the whole tensor's
// stream, so it holds exactly the values the whole one would: a run initialises alike at any
// tensor-parallel layout. Each value is a pure function of its index, so the fill is split over
// threads without changing a bit (a TP 4 rank's part of a 2 B model took ~30 s on one core).
template <class F>
void fill_split(Param& p, F f) {
  const std::vector<int64_t> gi = p.global_indices();
  std::vector<double> v(gi.size());
  const int64_t n = static_cast<int64_t>(gi.size());
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t workers = std::clamp<int64_t>(n >> 16, 1, cores);  // >= 64K values per thread
  std::vector<std::thread> pool;
  for (int64_t w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (int64_t k = w * n / workers; k < (w + 1) * n / workers; ++k) v[k] = f(static_cast<uint64_t>(gi[k]));
    });
  for (std::thread& t : pool) t.join();
  p.value.copy_from(Tensor::from_vector<double>(p.value.shape(), v).to_host(p.value.dtype()));
}

}  // namespace

void init_normal(Param& p, uint64_t seed, double std) {
  const Philox rng(seed, name_stream(p.name));
  if (!p.tensor_split()) return fill_normal(p.value, rng, 0.0, std);
  fill_split(p, [&](uint64_t i) { return std * rng.normal(i); });
}

void init_uniform(Param& p, uint64_t seed, double lo, double hi) {
  const Philox rng(seed, name_stream(p.name));
  if (!p.tensor_split()) return fill_uniform(p.value, rng, lo, hi);
  fill_split(p, [&](uint64_t i) { return lo + (hi - lo) * rng.uniform(i); });
}

Tensor local_part(const Param& p, const Tensor& whole) {
  if (!p.tensor_split()) return whole;
  NM_CHECK(whole.shape() == p.global_shape(), "{}: whole tensor {} for global shape {}", p.name, whole.shape().str(),
           p.global_shape().str());
  const std::vector<double> all = whole.to_f64_vector();
  const std::vector<int64_t> gi = p.global_indices();
  std::vector<double> mine(gi.size());
  for (size_t k = 0; k < gi.size(); ++k) mine[k] = all[static_cast<size_t>(gi[k])];
  return Tensor::from_vector<double>(p.value.shape(), mine).to_host(whole.dtype());
}

void init_constant(Param& p, double value) { fill_uniform(p.value, Philox(0), value, value); }

}  // namespace nemotron::model
