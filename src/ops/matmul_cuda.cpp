// cuBLASLt matmul with a per-shape cache: the descriptors, layouts and the heuristic's algorithm
// are built once per (shape, dtypes, alignment) key, since a training step repeats the same few
// shapes and a heuristic query costs far more than the GEMM launch. Shapes that vary from step to
// step (MoE expert token counts) reuse the algorithm found for the same power-of-two size bucket,
// after cuBLASLt confirms that it supports the exact shape. Decoding with continuous batching
// brings a new M for every batch size and every expert's token count: the cache keeps the most
// recently used plans (an LRU, core/lru_cache.h), so a stream of new shapes evicts only cold ones
// and the shapes of every step stay planned (clearing everything at the limit re-planned them all).
// Decode-size linears (bfloat16 y = x W^T with 1..16 rows) skip cuBLASLt for the skinny GEMM
// (ops/skinny_gemm_cuda.h) where skinny_gemm_wins says it measured faster.
#if NEMOTRON_CUDA
#include "ops/matmul_cuda.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "backend/cuda/cuda_check.h"
#include "core/lru_cache.h"
#include "ops/skinny_gemm_cuda.h"

namespace nemotron::ops {

namespace {

struct Key {
  cublasLtHandle_t lt;
  GemmDType ab, c;
  bool trans_a, trans_b, bias;
  int64_t M, N, K, lda, ldb, batch, stride_a, stride_b, stride_c;
  uint32_t align_a, align_b, align_c, align_bias;
  int32_t sm_target;  // CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, 0: none
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = std::hash<const void*>()(k.lt);
    auto mix = [&](uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    mix(static_cast<uint64_t>(k.ab) | static_cast<uint64_t>(k.c) << 8 | uint64_t{k.trans_a} << 16 |
        uint64_t{k.trans_b} << 17 | uint64_t{k.bias} << 18);
    for (int64_t v : {k.M, k.N, k.K, k.lda, k.ldb, k.batch, k.stride_a, k.stride_b, k.stride_c})
      mix(static_cast<uint64_t>(v));
    mix(uint64_t{k.align_a} | uint64_t{k.align_b} << 16 | uint64_t{k.align_c} << 32 | uint64_t{k.align_bias} << 48);
    mix(static_cast<uint64_t>(k.sm_target));
    return h;
  }
};

// The plan for one key: cuBLASLt objects are freed with the cache (at exit).
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

// The key with M, N, K rounded up to powers of two: shapes in one bucket share an algorithm.
int64_t round_up_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}
Key bucket_of(Key k) {
  k.M = round_up_pow2(k.M), k.N = round_up_pow2(k.N), k.K = round_up_pow2(k.K);
  k.lda = k.ldb = k.stride_a = k.stride_b = k.stride_c = 0;
  return k;
}

cudaDataType_t cuda_type(GemmDType t) { return t == GemmDType::bf16 ? CUDA_R_16BF : CUDA_R_32F; }
size_t type_bytes(GemmDType t) { return t == GemmDType::bf16 ? 2 : 4; }

// The largest power of two (up to 256) dividing every address a batched operand takes.
uint32_t alignment(const void* p, int64_t batch, int64_t stride_elems, size_t elem_bytes) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | 256u;
  if (batch > 1) bits |= static_cast<uint64_t>(stride_elems) * elem_bytes;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

template <class V>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, V v) {
  NM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
}

// A column-major layout (rows x cols, leading dim ld), batched when batch > 1.
cublasLtMatrixLayout_t make_layout(GemmDType t, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                                   int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  NM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, cuda_type(t), static_cast<uint64_t>(rows),
                                             static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    int32_t count = static_cast<int32_t>(batch);
    NM_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    NM_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return l;
}

// Row-major c = op(a) op(b) is column-major c^T = op(b)^T op(a)^T: cuBLASLt's first operand is our
// b (stored N x K, or K x N when transposed) and its second our a; D is N x M with ld N.
// `known` is an algorithm found for another shape of the same bucket: used when it fits this one.
std::unique_ptr<Plan> make_plan(const Key& k, size_t workspace_bytes, const cublasLtMatmulAlgo_t* known) {
  auto p = std::make_unique<Plan>();
  NM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_desc(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(k.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N));
  set_desc(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(k.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N));
  if (k.sm_target > 0) set_desc(p->desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, k.sm_target);
  if (k.bias) {
    set_desc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    set_desc(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(cuda_type(k.c)));
  }
  p->la = k.trans_b ? make_layout(k.ab, k.K, k.N, k.ldb, k.batch, k.stride_b)
                    : make_layout(k.ab, k.N, k.K, k.ldb, k.batch, k.stride_b);
  p->lb = k.trans_a ? make_layout(k.ab, k.M, k.K, k.lda, k.batch, k.stride_a)
                    : make_layout(k.ab, k.K, k.M, k.lda, k.batch, k.stride_a);
  p->lc = make_layout(k.c, k.N, k.M, k.N, k.batch, k.stride_c);
  if (known) {
    cublasLtMatmulHeuristicResult_t check{};
    if (cublasLtMatmulAlgoCheck(k.lt, p->desc, p->la, p->lb, p->lc, p->lc, known, &check) == CUBLAS_STATUS_SUCCESS &&
        check.workspaceSize <= workspace_bytes) {
      p->algo = *known;
      return p;
    }
  }

  cublasLtMatmulPreference_t pref = nullptr;
  NM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, decltype(&cublasLtMatmulPreferenceDestroy)>
      keep(pref, &cublasLtMatmulPreferenceDestroy);
  uint64_t ws = workspace_bytes;
  NM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  // Lt's "A" is our b and its "B" our a.
  for (auto [attr, v] : {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, k.align_b},
                         std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, k.align_a},
                         std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, k.align_c},
                         std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, k.align_c}})
    NM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  NM_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(k.lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1, &result, &found));
  NM_CHECK(found > 0, "cuBLASLt has no algorithm for matmul M={} N={} K={} batch={} (trans_a={}, trans_b={})", k.M,
           k.N, k.K, k.batch, k.trans_a, k.trans_b);
  p->algo = result.algo;
  return p;
}

std::atomic<bool> skinny_on{true};
std::atomic<int> sm_margin{0};

SkinnyGemmCudaArgs skinny_args(const MatmulCudaArgs& a) {
  SkinnyGemmCudaArgs s;
  s.x = a.a, s.w = a.b, s.y = a.c, s.bias = a.bias;
  s.M = a.M, s.N = a.N, s.K = a.K, s.lda = a.lda, s.ldw = a.ldb;
  s.y_f32 = a.c_dtype == GemmDType::f32;
  s.alpha = a.alpha, s.beta = a.beta;
  return s;
}

// Multiprocessors of the current device (read once per device).
int64_t sm_count() {
  static std::atomic<int> counts[64] = {};
  int dev = 0;
  NM_CUDA_CHECK(cudaGetDevice(&dev));
  std::atomic<int>& c = counts[dev & 63];
  int n = c.load(std::memory_order_relaxed);
  if (n == 0) {
    NM_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    c.store(n, std::memory_order_relaxed);
  }
  return n;
}

// The measured rule: where the skinny GEMM beat cuBLASLt's heuristic choice. bench/cuda_skinny_gemm
// timed both on an H100 (b0ff189, bench/results/skinny_gemm.jsonl) on every decode linear of the
// bench configs (the 8B's 4096 x 4096 ... 128256 x 4096; the 125M and 1B hybrids' 768 / 1024-wide
// ones) at 1..16 rows. The kernel runs a block per 16 rows of W, two blocks per multiprocessor:
//  - blocks fit one wave: it won at every shape for M <= 8 (k/v 1024 x 4096: 8.2 vs 10.8 us,
//    q/o 4096 x 4096: 15.7 vs 17.3 us, down 4096 x 14336: 44.6 vs 46.5 us, the hybrids' linears
//    4-7 vs 7-10 us). At 9..16 rows (two mma tiles) it was ~9% slower than at 8: a tie at
//    4096 x 4096, a loss beyond (down: 48.3 vs 47.2 us), still a win on smaller weights.
//  - several waves: it won only for long rows and a full last wave (the 8B LM head, 128256 x 4096,
//    352 vs 379 us at M <= 8); it lost with a partial last wave (gate/up 14336 x 4096, 3.4 waves:
//    46.0 vs 44.7 us at M 1, 50.3 vs 45.5 at 8) and with short rows (K <= 1024: the 125M LM head
//    32768 x 768, 24.7 vs 22.8 us; the 1B's in_proj 6176 x 1024, 9.8 vs 8.2 us).
bool skinny_gemm_wins(const SkinnyGemmCudaArgs& s) {
  const int64_t blocks = (s.N + 15) / 16, slots = 2 * sm_count();
  if (blocks <= slots) return s.M <= 8 || s.N * s.K <= int64_t{4096} * 4096;
  const int64_t waves = (blocks + slots - 1) / slots;
  return s.M <= 8 && s.K >= 2048 && blocks * 10 >= waves * slots * 9;
}

}  // namespace

void set_skinny_gemm_enabled(bool on) { skinny_on.store(on, std::memory_order_relaxed); }
void set_gemm_sm_margin(int sms) { sm_margin.store(std::max(0, sms), std::memory_order_relaxed); }
int gemm_sm_margin() { return sm_margin.load(std::memory_order_relaxed); }
bool skinny_gemm_enabled() { return skinny_on.load(std::memory_order_relaxed); }

bool uses_skinny_gemm(const MatmulCudaArgs& a) {
  if (!skinny_gemm_enabled() || a.ab != GemmDType::bf16 || a.batch != 1 || a.trans_a || !a.trans_b) return false;
  const SkinnyGemmCudaArgs s = skinny_args(a);
  return skinny_gemm_supported(s) && skinny_gemm_wins(s);
}

void matmul_cuda(cublasLtHandle_t lt, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                 const MatmulCudaArgs& a) {
  if (uses_skinny_gemm(a)) {
    NM_CUDA_CHECK(skinny_gemm_cuda(skinny_args(a), stream));
    return;
  }
  const size_t ab_bytes = type_bytes(a.ab), c_bytes = type_bytes(a.c_dtype);
  Key k{lt, a.ab, a.c_dtype, a.trans_a, a.trans_b, a.bias != nullptr, a.M, a.N, a.K, a.lda, a.ldb, a.batch,
        a.batch > 1 ? a.stride_a : 0, a.batch > 1 ? a.stride_b : 0, a.batch > 1 ? a.stride_c : 0,
        alignment(a.a, a.batch, a.stride_a, ab_bytes), alignment(a.b, a.batch, a.stride_b, ab_bytes),
        alignment(a.c, a.batch, a.stride_c, c_bytes), a.bias ? alignment(a.bias, 1, 0, c_bytes) : 0u, 0};
  if (const int margin = gemm_sm_margin(); margin > 0)
    k.sm_target = static_cast<int32_t>(std::max<int64_t>(1, sm_count() - margin));
  // Plans hold a few small cuBLASLt objects each (host memory only); the bucket map holds one
  // algorithm per power-of-two bucket of (M, N, K).
  static std::mutex mu;
  static LruCache<Key, std::unique_ptr<Plan>, KeyHash> cache(4096);
  static LruCache<Key, cublasLtMatmulAlgo_t, KeyHash> bucket_algo(1024);
  std::lock_guard<std::mutex> lock(mu);  // the bias pointer lives in the shared descriptor
  std::unique_ptr<Plan>* found = cache.find(k);
  if (!found) {
    const Key bucket = bucket_of(k);
    const cublasLtMatmulAlgo_t* known = bucket_algo.find(bucket);
    auto plan = make_plan(k, workspace_bytes, known);
    if (!known) bucket_algo.insert(bucket, plan->algo);
    found = &cache.insert(k, std::move(plan));
  }
  Plan& p = **found;
  if (a.bias) set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, a.bias);
  NM_CUBLAS_CHECK(cublasLtMatmul(lt, p.desc, &a.alpha, a.b, p.la, a.a, p.lb, &a.beta, a.c, p.lc, a.c, p.lc, &p.algo,
                                 workspace, workspace_bytes, stream));
}

}  // namespace nemotron::ops
#endif  // NEMOTRON_CUDA
