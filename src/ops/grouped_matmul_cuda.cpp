// Grouped expert GEMMs on cuBLAS. Row-major [rows, cols] is column-major [cols, rows], so with
// x_e [r, in], W_e [out, in], dy_e [r, out] (all row-major):
//   y_e^T  [out, r]  = W_e^T(op T) . x_e^T            gemm(T, N, m=out, n=r,   k=in)
//   dx_e^T [in, r]   = W_e^T(op N) . dy_e^T           gemm(N, N, m=in,  n=r,   k=out)
//   dW_e^T [in, out] += x_e^T(op N) . dy_e(op T)      gemm(N, T, m=in,  n=out, k=r)
// All experts of one product go into one cublasGemmGroupedBatchedEx (one group per non-empty
// expert); its device pointer arrays are built on the host and copied once per call.
#if NEMOTRON_CUDA
#include "ops/grouped_matmul_cuda.h"

#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"

namespace nemotron::ops {

namespace {

struct Problem {
  cublasOperation_t ta, tb;
  int m, n, k;
  const void* a;
  int lda;
  const void* b;
  int ldb;
  void* c;
  int ldc;
};

bool g_force_per_expert = false;
const char* g_last_path[2] = {"none", "none"};
// Set once a dtype combination turned out to have no grouped kernel: later calls go per expert.
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
  // From pageable memory: staged before the call returns, so `ptrs` may go out of scope.
  NM_CUDA_CHECK(cudaMemcpyAsync(dev, ptrs.data(), 3 * G * sizeof(void*), cudaMemcpyHostToDevice, st));
  cublasStatus_t status = cublasGemmGroupedBatchedEx(
      h, ta.data(), tb.data(), m.data(), n.data(), k.data(), alpha.data(), const_cast<const void* const*>(dev),
      cuda_type(ab), lda.data(), const_cast<const void* const*>(dev + G), cuda_type(ab), ldb.data(), betas.data(),
      dev + 2 * G, cuda_type(c), ldc.data(), static_cast<int>(G), size.data(), CUBLAS_COMPUTE_32F);
  NM_CUDA_CHECK(cudaFreeAsync(dev, st));
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE) return false;
  NM_CUBLAS_CHECK(status);
  return true;
}

void run(Context& ctx, const std::vector<Problem>& ps, DType ab, DType c, float beta, bool weight_gradient) {
  if (ps.empty()) return;
  cublasHandle_t h = cuda::cublas_handle(ctx);
  bool& unsupported = g_grouped_unsupported[ab == DType::bf16][c == DType::f32];
  if (!g_force_per_expert && !unsupported) {
    if (run_grouped(ctx, h, ps, ab, c, beta)) {
      g_last_path[weight_gradient] = "grouped";
      return;
    }
    unsupported = true;
  }
  run_per_expert(h, ps, ab, c, beta);
  g_last_path[weight_gradient] = "per-expert";
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

void grouped_gemm_force_per_expert(bool on) { g_force_per_expert = on; }
const char* grouped_gemm_last_path(bool weight_gradient) { return g_last_path[weight_gradient]; }

void grouped_linear_forward_cuda(Context& ctx, const Tensor& x, const std::vector<int64_t>& offsets,
                                 const std::vector<Tensor>& weights, Tensor& y) {
  const DType T = x.dtype();
  NM_CHECK(T == DType::f32 || T == DType::bf16, "grouped_linear on CUDA: float32 or bfloat16, got {}", dtype_name(T));
  check_dtype(y, T, "y");
  const int in = as_int(x.dim(1), "in"), out = as_int(y.dim(1), "out");
  const size_t es = dtype_size(T);
  std::vector<Problem> ps;
  for (size_t e = 0; e < weights.size(); ++e) {
    const int64_t a = offsets[e], r = offsets[e + 1] - a;
    if (r == 0) continue;
    check_dtype(weights[e], T, "an expert weight");
    ps.push_back({CUBLAS_OP_T, CUBLAS_OP_N, out, as_int(r, "rows"), in, weights[e].raw(), in,
                  static_cast<const char*>(x.raw()) + a * in * es, in, static_cast<char*>(y.raw()) + a * out * es,
                  out});
  }
  run(ctx, ps, T, T, 0.0f, false);
}

void grouped_linear_backward_cuda(Context& ctx, const Tensor& x, const std::vector<int64_t>& offsets,
                                  const std::vector<Tensor>& weights, const Tensor& dy, Tensor& dx,
                                  std::vector<Tensor>& dweights) {
  const DType T = x.dtype();
  NM_CHECK(T == DType::f32 || T == DType::bf16, "grouped_linear on CUDA: float32 or bfloat16, got {}", dtype_name(T));
  check_dtype(dy, T, "dy");
  const int in = as_int(x.dim(1), "in"), out = as_int(dy.dim(1), "out");
  const size_t es = dtype_size(T);
  std::vector<Problem> pdx, pdw;
  for (size_t e = 0; e < weights.size(); ++e) {
    const int64_t a = offsets[e], r = offsets[e + 1] - a;
    if (r == 0) continue;
    const char* xe = static_cast<const char*>(x.raw()) + a * in * es;
    const char* dye = static_cast<const char*>(dy.raw()) + a * out * es;
    check_dtype(weights[e], T, "an expert weight");
    check_dtype(dweights[e], grad_dtype(T), "an expert weight gradient");
    if (dx.defined())
      pdx.push_back({CUBLAS_OP_N, CUBLAS_OP_N, in, as_int(r, "rows"), out, weights[e].raw(), in, dye, out,
                     static_cast<char*>(dx.raw()) + a * in * es, in});
    pdw.push_back({CUBLAS_OP_N, CUBLAS_OP_T, in, out, as_int(r, "rows"), xe, in, dye, out, dweights[e].raw(), in});
  }
  if (dx.defined()) {
    check_dtype(dx, T, "dx");
    run(ctx, pdx, T, T, 0.0f, false);
  }
  run(ctx, pdw, T, grad_dtype(T), 1.0f, true);
}

}  // namespace nemotron::ops
#endif
