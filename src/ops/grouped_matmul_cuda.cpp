// Grouped expert GEMMs on CUDA (the choice of implementation: grouped_matmul_cuda.h). By default
// all three bf16 products run in our wgmma kernel (grouped_gemm_wgmma.cu). cuBLAS runs what that
// kernel cannot (float32, row widths that are not multiples of 8, unaligned rows, GPUs other than
// Hopper): all experts of one product in one cublasGemmGroupedBatchedEx (one group per non-empty
// expert; its device pointer arrays are built on the host and uploaded as kernel parameters,
// ops/param_upload_cuda.h), or one cublasGemmEx per expert where it has no grouped kernel for the
// dtypes (bf16 in, float32 out).
// Row-major [rows, cols] is column-major [cols, rows], so with x_e [r, in], W_e [out, in],
// dy_e [r, out] (all row-major) the cuBLAS calls are
//   y_e^T  [out, r]  = W_e^T(op T) . x_e^T            gemm(T, N, m=out, n=r,   k=in)
//   dx_e^T [in, r]   = W_e^T(op N) . dy_e^T           gemm(N, N, m=in,  n=r,   k=out)
//   dW_e^T [in, out] += x_e^T(op N) . dy_e(op T)      gemm(N, T, m=in,  n=out, k=r)
#if NEMOTRON_CUDA
#include "ops/grouped_matmul_cuda.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/grouped_gemm_wgmma.h"
#include "ops/param_upload_cuda.h"

namespace nemotron::ops {

namespace {

struct Problem {  // one cuBLAS (column-major) GEMM
  cublasOperation_t ta, tb;
  int m, n, k;
  const void* a;
  int lda;
  const void* b;
  int ldb;
  void* c;
  int ldc;
};

GroupedGemmImpl g_impl[2] = {GroupedGemmImpl::automatic, GroupedGemmImpl::automatic};  // [y/dx, dW]
const char* g_last_path[2] = {"none", "none"};
// Set once a dtype combination turned out to have no grouped cuBLAS kernel: later calls go per expert.
bool g_grouped_unsupported[2][2] = {{false, false}, {false, false}};  // [bf16 inputs][float32 output]

cudaDataType_t cuda_type(DType t) { return t == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

void run_per_expert(cublasHandle_t h, const std::vector<Problem>& ps, DType ab, DType c, float beta) {
  const float alpha = 1.0f;
  for (const Problem& p : ps)
    NM_CUBLAS_CHECK(cublasGemmEx(h, p.ta, p.tb, p.m, p.n, p.k, &alpha, p.a, cuda_type(ab), p.lda, p.b, cuda_type(ab),
                                 p.ldb, &beta, p.c, cuda_type(c), p.ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// Returns false when cuBLAS has no grouped kernel for these types.
bool run_grouped(Context& ctx, cublasHandle_t h, const std::vector<Problem>& ps, DType ab, DType c, float beta) {
  const size_t G = ps.size();
  std::vector<cublasOperation_t> ta(G), tb(G);
  std::vector<int> m(G), n(G), k(G), lda(G), ldb(G), ldc(G), size(G, 1);
  std::vector<float> alpha(G, 1.0f), betas(G, beta);
  std::vector<const void*> ptrs(3 * G);
  for (size_t g = 0; g < G; ++g) {
    const Problem& p = ps[g];
    ta[g] = p.ta, tb[g] = p.tb, m[g] = p.m, n[g] = p.n, k[g] = p.k, lda[g] = p.lda, ldb[g] = p.ldb, ldc[g] = p.ldc;
    ptrs[g] = p.a, ptrs[G + g] = p.b, ptrs[2 * G + g] = p.c;
  }
  cudaStream_t st = cuda::cuda_stream(ctx);
  void** dev = nullptr;
  NM_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&dev), 3 * G * sizeof(void*), st));
  NM_CUDA_CHECK(upload_by_params(dev, ptrs.data(), 3 * G * sizeof(void*), st));  // `ptrs` may go out of scope
  cublasStatus_t status = cublasGemmGroupedBatchedEx(
      h, ta.data(), tb.data(), m.data(), n.data(), k.data(), alpha.data(), const_cast<const void* const*>(dev),
      cuda_type(ab), lda.data(), const_cast<const void* const*>(dev + G), cuda_type(ab), ldb.data(), betas.data(),
      dev + 2 * G, cuda_type(c), ldc.data(), static_cast<int>(G), size.data(), CUBLAS_COMPUTE_32F);
  NM_CUDA_CHECK(cudaFreeAsync(dev, st));
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE) return false;
  NM_CUBLAS_CHECK(status);
  return true;
}

void run_cublas(Context& ctx, const std::vector<Problem>& ps, DType ab, DType c, float beta, bool weight_gradient) {
  if (ps.empty()) return;
  cublasHandle_t h = cuda::cublas_handle(ctx);
  bool& unsupported = g_grouped_unsupported[ab == DType::bf16][c == DType::f32];
  if (g_impl[weight_gradient] != GroupedGemmImpl::cublas_per_expert && !unsupported) {
    if (run_grouped(ctx, h, ps, ab, c, beta)) {
      g_last_path[weight_gradient] = "cublas-grouped";
      return;
    }
    unsupported = true;
  }
  run_per_expert(h, ps, ab, c, beta);
  g_last_path[weight_gradient] = "cublas-per-expert";
}

void run_ours(Context& ctx, const std::vector<GroupedGemmProblem>& ps, bool a_kmajor, bool b_kmajor, bool f32_acc,
              bool weight_gradient) {
  if (ps.empty()) return;
  NM_CUDA_CHECK(grouped_gemm_wgmma_bf16_cuda(ps.data(), static_cast<int>(ps.size()), a_kmajor, b_kmajor, f32_acc,
                                             cuda::cuda_stream(ctx)));
  g_last_path[weight_gradient] = "ours-wgmma";
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Our kernel needs a Hopper GPU, bf16, row widths that are non-zero multiples of 8 and 16-byte
// aligned rows; it runs unless cuBLAS is asked for.
bool ours_applies(bool weight_gradient, DType T, int in, int out, const std::vector<Tensor>& weights,
                  std::initializer_list<const Tensor*> ts) {
  const GroupedGemmImpl impl = g_impl[weight_gradient];
  const bool wanted = (impl == GroupedGemmImpl::automatic || impl == GroupedGemmImpl::ours) && grouped_gemm_wgmma_supported();
  if (!wanted || T != DType::bf16 || in <= 0 || out <= 0 || in % 8 != 0 || out % 8 != 0) return false;
  for (const Tensor& w : weights)
    if (!aligned16(w.raw())) return false;
  for (const Tensor* t : ts)
    if (t->defined() && !aligned16(t->raw())) return false;
  return true;
}

void check_dtype(const Tensor& t, DType want, const char* what) {
  NM_CHECK(t.dtype() == want, "grouped_linear on CUDA: {} is {}, expected {}", what, dtype_name(t.dtype()),
           dtype_name(want));
}

int as_int(int64_t v, const char* what) {
  NM_CHECK(v <= INT32_MAX, "grouped_linear on CUDA: {} = {} exceeds cuBLAS's int range", what, v);
  return static_cast<int>(v);
}

}  // namespace

void set_grouped_gemm_impl(GroupedGemmImpl impl) { g_impl[0] = g_impl[1] = impl; }
void set_grouped_gemm_impl(GroupedGemmImpl y_dx, GroupedGemmImpl dw) { g_impl[0] = y_dx, g_impl[1] = dw; }
const char* grouped_gemm_last_path(bool weight_gradient) { return g_last_path[weight_gradient]; }

void grouped_linear_forward_cuda(Context& ctx, const Tensor& x, const std::vector<int64_t>& offsets,
                                 const std::vector<Tensor>& weights, Tensor& y) {
  const DType T = x.dtype();
  NM_CHECK(T == DType::f32 || T == DType::bf16, "grouped_linear on CUDA: float32 or bfloat16, got {}", dtype_name(T));
  check_dtype(y, T, "y");
  for (const Tensor& w : weights) check_dtype(w, T, "an expert weight");
  const int in = as_int(x.dim(1), "in"), out = as_int(y.dim(1), "out");
  const size_t es = dtype_size(T);
  const bool ours = ours_applies(false, T, in, out, weights, {&x, &y});
  std::vector<Problem> ps;
  std::vector<GroupedGemmProblem> gs;
  for (size_t e = 0; e < weights.size(); ++e) {
    const int64_t a = offsets[e], r = offsets[e + 1] - a;
    if (r == 0) continue;
    const char* xe = static_cast<const char*>(x.raw()) + a * in * es;
    char* ye = static_cast<char*>(y.raw()) + a * out * es;
    // Ours: M = r, N = out, K = in; A = x_e (K-major), B = W_e (K-major).
    if (ours) gs.push_back({xe, weights[e].raw(), ye, as_int(r, "rows"), out, in, in, in, out});
    else ps.push_back({CUBLAS_OP_T, CUBLAS_OP_N, out, as_int(r, "rows"), in, weights[e].raw(), in, xe, in, ye, out});
  }
  if (ours) run_ours(ctx, gs, true, true, false, false);
  else run_cublas(ctx, ps, T, T, 0.0f, false);
}

bool grouped_linear_counted_on_device_cuda(const Tensor& x, const std::vector<Tensor>& weights, const Tensor& y) {
  if (x.rank() != 2 || y.rank() != 2 || y.dtype() != x.dtype() || x.dim(0) > INT32_MAX) return false;
  for (const Tensor& w : weights)
    if (w.dtype() != x.dtype()) return false;
  return ours_applies(false, x.dtype(), static_cast<int>(std::min<int64_t>(x.dim(1), INT32_MAX)),
                      static_cast<int>(std::min<int64_t>(y.dim(1), INT32_MAX)), weights, {&x, &y});
}

void grouped_linear_forward_counted_cuda(Context& ctx, const Tensor& x, const Tensor& counts,
                                         const std::vector<Tensor>& weights, Tensor& y) {
  cudaStream_t st = cuda::cuda_stream(ctx);
  const size_t E = weights.size();
  std::vector<const void*> ptrs(E);
  for (size_t e = 0; e < E; ++e) ptrs[e] = weights[e].raw();
  void** dev = nullptr;
  NM_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&dev), E * sizeof(void*), st));
  NM_CUDA_CHECK(upload_by_params(dev, ptrs.data(), E * sizeof(void*), st));
  ExpertRowsGemm g;
  g.counts = static_cast<const int32_t*>(counts.raw());
  g.experts = static_cast<int>(E);
  g.b = dev;
  g.a = x.raw(), g.c = y.raw();
  g.rows = as_int(x.dim(0), "rows"), g.n = as_int(y.dim(1), "out"), g.k = as_int(x.dim(1), "in");
  NM_CUDA_CHECK(grouped_gemm_wgmma_bf16_expert_rows_cuda(g, st));
  NM_CUDA_CHECK(cudaFreeAsync(dev, st));
  g_last_path[0] = "ours-wgmma-device-counts";
}

void grouped_linear_backward_cuda(Context& ctx, const Tensor& x, const std::vector<int64_t>& offsets,
                                  const std::vector<Tensor>& weights, const Tensor& dy, Tensor& dx,
                                  std::vector<Tensor>& dweights) {
  const DType T = x.dtype();
  NM_CHECK(T == DType::f32 || T == DType::bf16, "grouped_linear on CUDA: float32 or bfloat16, got {}", dtype_name(T));
  check_dtype(dy, T, "dy");
  if (dx.defined()) check_dtype(dx, T, "dx");
  const bool want_dw = !dweights.empty();  // empty: frozen experts, no dW products
  for (size_t e = 0; e < weights.size(); ++e) {
    check_dtype(weights[e], T, "an expert weight");
    if (want_dw) check_dtype(dweights[e], grad_dtype(T), "an expert weight gradient");
  }
  const int in = as_int(x.dim(1), "in"), out = as_int(dy.dim(1), "out");
  const size_t es = dtype_size(T);
  const bool ours_dx = ours_applies(false, T, in, out, weights, {&x, &dy, &dx});
  const bool ours_dw = ours_applies(true, T, in, out, dweights, {&x, &dy});
  std::vector<Problem> pdx, pdw;
  std::vector<GroupedGemmProblem> gdx, gdw;
  for (size_t e = 0; e < weights.size(); ++e) {
    const int64_t a = offsets[e], r64 = offsets[e + 1] - a;
    if (r64 == 0) continue;
    const int r = as_int(r64, "rows");
    const char* xe = static_cast<const char*>(x.raw()) + a * in * es;
    const char* dye = static_cast<const char*>(dy.raw()) + a * out * es;
    char* dxe = dx.defined() ? static_cast<char*>(dx.raw()) + a * in * es : nullptr;
    // Ours, dx: M = r, N = in, K = out; A = dy_e (K-major), B(k=o, n=i) = W_e[o, i] (N-major).
    if (dxe && ours_dx) gdx.push_back({dye, weights[e].raw(), dxe, r, in, out, out, in, in});
    else if (dxe) pdx.push_back({CUBLAS_OP_N, CUBLAS_OP_N, in, r, out, weights[e].raw(), in, dye, out, dxe, in});
    // Ours, dW: M = out, N = in, K = r; A(m=o, k=r) = dy_e[r, o] (M-major), B(k=r, n=i) = x_e[r, i] (N-major).
    if (!want_dw) continue;
    if (ours_dw) gdw.push_back({dye, xe, dweights[e].raw(), out, in, r, out, in, in});
    else pdw.push_back({CUBLAS_OP_N, CUBLAS_OP_T, in, out, r, xe, in, dye, out, dweights[e].raw(), in});
  }
  if (ours_dx) run_ours(ctx, gdx, true, false, false, false);
  else run_cublas(ctx, pdx, T, T, 0.0f, false);
  if (ours_dw) run_ours(ctx, gdw, false, false, true, true);
  else run_cublas(ctx, pdw, T, grad_dtype(T), 1.0f, true);
}

}  // namespace nemotron::ops
#endif
