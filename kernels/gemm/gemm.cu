// QKV projection GEMM through cuBLASLt (see gemm.cuh).
#include "kernels/gemm/gemm.cuh"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cublasLt.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <utility>

#include "kernels/common/check.hpp"
#include "kernels/common/hash.hpp"
#include "kernels/common/shapes.hpp"

namespace dropbench {

GemmDtype parse_gemm_dtype(const std::string& s) {
  if (s == "fp8") return GemmDtype::fp8_e4m3;
  if (s == "bf16") return GemmDtype::bf16;
  throw UsageError("gemm: dtype '" + s + "' is not supported (allowed: fp8, bf16)");
}

const char* gemm_dtype_name(GemmDtype d) { return d == GemmDtype::fp8_e4m3 ? "fp8" : "bf16"; }

GemmShape qkv_gemm_shape(int64_t batch, int64_t sq, int64_t embed, int64_t q_heads, int64_t kv_heads,
                         int64_t head_dim) {
  const QkvDims d = qkv_dims(batch, sq, embed, q_heads, kv_heads, head_dim);
  GemmShape s;
  s.m = d.m;
  s.k = d.k;
  s.n = d.n;
  return s;
}

void validate_gemm_shape(const GemmShape& s, GemmDtype d) {
  auto dims = [&] {
    return "M=" + std::to_string(s.m) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k);
  };
  if (s.m < 1 || s.n < 1 || s.k < 1) throw UsageError("gemm: every dimension must be >= 1 (" + dims() + ")");
  if (s.k % 16 != 0 || s.n % 16 != 0)
    throw UsageError(std::string("gemm: K (embed) and N ((q_heads + 2 kv_heads) * head_dim) must be multiples "
                                 "of 16 for the ") +
                     gemm_dtype_name(d) + " path (" + dims() + ")");
  // cuBLASLt takes 64-bit sizes through its layouts, but its leading dimensions and most kernels' index
  // arithmetic are happiest below 2^31 elements per dimension.
  if (s.m > (int64_t{1} << 31) - 1 || s.n > (int64_t{1} << 31) - 1 || s.k > (int64_t{1} << 31) - 1)
    throw UsageError("gemm: a dimension exceeds 2^31 - 1 (" + dims() + ")");
}

// ---------------------------------------------------------------------------------------------------------
// Names of the algorithm-configuration enums (values come from the header's enumerators, so they cannot
// drift). Tiles: the shapes Hopper's kernels use; others print as "tile#<id>".
// ---------------------------------------------------------------------------------------------------------
namespace {

struct EnumName {
  unsigned value;
  const char* name;
};

#define DB_TILE(a, b) {CUBLASLT_MATMUL_TILE_##a##x##b, #a "x" #b}
constexpr EnumName kTiles[] = {
    DB_TILE(8, 8),     DB_TILE(16, 16),   DB_TILE(32, 32),   DB_TILE(64, 32),   DB_TILE(32, 64),
    DB_TILE(64, 64),   DB_TILE(64, 96),   DB_TILE(96, 64),   DB_TILE(64, 128),  DB_TILE(128, 64),
    DB_TILE(96, 128),  DB_TILE(128, 96),  DB_TILE(128, 128), DB_TILE(64, 192),  DB_TILE(192, 64),
    DB_TILE(128, 160), DB_TILE(160, 128), DB_TILE(128, 192), DB_TILE(192, 128), DB_TILE(64, 256),
    DB_TILE(256, 64),  DB_TILE(128, 256), DB_TILE(256, 128), DB_TILE(192, 192), DB_TILE(192, 256),
    DB_TILE(256, 192), DB_TILE(256, 256), DB_TILE(64, 512),  DB_TILE(512, 64),  DB_TILE(128, 512),
    DB_TILE(512, 128), DB_TILE(256, 512), DB_TILE(512, 512), DB_TILE(128, 320), DB_TILE(128, 384),
    DB_TILE(320, 128), DB_TILE(384, 128), DB_TILE(256, 32),  DB_TILE(32, 256),  DB_TILE(128, 32),
    DB_TILE(32, 128),  DB_TILE(256, 96),  DB_TILE(256, 160), DB_TILE(256, 224), DB_TILE(128, 224),
    DB_TILE(224, 128), DB_TILE(64, 320),  DB_TILE(64, 384),  DB_TILE(96, 256),  DB_TILE(160, 256),
    // Seen on the H200 (cuBLASLt 13.1) for the QKV shapes: M-tiles that are not powers of two, tiny-M tiles.
    DB_TILE(8, 64),    DB_TILE(168, 128), DB_TILE(176, 128), DB_TILE(128, 152), DB_TILE(256, 152),
};
#undef DB_TILE

#define DB_STAGES(a, b) {CUBLASLT_MATMUL_STAGES_##a##x##b, #a "x" #b}
constexpr EnumName kStages[] = {
    DB_STAGES(16, 1),    DB_STAGES(16, 2),    DB_STAGES(16, 3),    DB_STAGES(16, 4),    DB_STAGES(16, 5),
    DB_STAGES(16, 6),    DB_STAGES(32, 1),    DB_STAGES(32, 2),    DB_STAGES(32, 3),    DB_STAGES(32, 4),
    DB_STAGES(32, 5),    DB_STAGES(32, 6),    DB_STAGES(64, 1),    DB_STAGES(64, 2),    DB_STAGES(64, 3),
    DB_STAGES(64, 4),    DB_STAGES(64, 5),    DB_STAGES(64, 6),    DB_STAGES(128, 1),   DB_STAGES(128, 2),
    DB_STAGES(128, 3),   DB_STAGES(128, 4),   DB_STAGES(128, 5),   DB_STAGES(128, 6),   DB_STAGES(32, 10),
    DB_STAGES(8, 4),     DB_STAGES(16, 10),   DB_STAGES(8, 5),     DB_STAGES(8, 3),     DB_STAGES(8, AUTO),
    DB_STAGES(16, AUTO), DB_STAGES(32, AUTO), DB_STAGES(64, AUTO), DB_STAGES(128, AUTO), DB_STAGES(256, AUTO),
};
#undef DB_STAGES

#define DB_CLUSTER(a, b) {CUBLASLT_CLUSTER_SHAPE_##a##x##b##x1, #a "x" #b "x1"}
constexpr EnumName kClusters[] = {
    {CUBLASLT_CLUSTER_SHAPE_AUTO, "auto"},
    DB_CLUSTER(1, 1),  DB_CLUSTER(2, 1), DB_CLUSTER(4, 1), DB_CLUSTER(1, 2), DB_CLUSTER(2, 2),
    DB_CLUSTER(4, 2),  DB_CLUSTER(1, 4), DB_CLUSTER(2, 4), DB_CLUSTER(4, 4), DB_CLUSTER(8, 1),
    DB_CLUSTER(1, 8),  DB_CLUSTER(8, 2), DB_CLUSTER(2, 8), DB_CLUSTER(16, 1), DB_CLUSTER(1, 16),
    DB_CLUSTER(3, 1),  DB_CLUSTER(1, 3), DB_CLUSTER(3, 2), DB_CLUSTER(2, 3), DB_CLUSTER(3, 3),
};
#undef DB_CLUSTER

template <size_t N>
std::string enum_name(const EnumName (&table)[N], unsigned v, const char* fallback) {
  for (const auto& e : table)
    if (e.value == v) return e.name;
  return std::string(fallback) + "#" + std::to_string(v);
}

}  // namespace

std::string GemmAlgoInfo::tile_name() const { return enum_name(kTiles, tile_id, "tile"); }
std::string GemmAlgoInfo::stages_name() const { return enum_name(kStages, stages_id, "stages"); }
std::string GemmAlgoInfo::cluster_name() const { return enum_name(kClusters, cluster_shape_id, "cluster"); }

std::string GemmAlgoInfo::summary() const {
  std::ostringstream o;
  o << "algo " << algo_id << " tile " << tile_name() << " stages " << stages_name() << " cluster "
    << cluster_name() << " splitk " << splitk << " swizzle " << cta_swizzling << " custom " << custom_option
    << " inner " << inner_shape_id << " rank " << heuristic_rank;
  return o.str();
}

// ---------------------------------------------------------------------------------------------------------
// QkvGemm
// ---------------------------------------------------------------------------------------------------------
// cuBLASLt's algo and heuristic-result types are typedefs of unnamed structs; nvcc 13.0's front end in C++20
// mode dies (internal error in find_allocated_name_reference) instantiating std::vector's destructor over
// such a type, so they are wrapped in named structs.
struct AlgoBox {
  cublasLtMatmulAlgo_t algo;
};
struct HeuristicBox {
  cublasLtMatmulHeuristicResult_t r;
};

struct QkvGemm::Impl {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  void* workspace = nullptr;
  std::vector<AlgoBox> algos;  // parallel to candidates_
  const void* x = nullptr;
  const void* w = nullptr;
  void* y = nullptr;
  const float* scale_x = nullptr;
  const float* scale_w = nullptr;

  void destroy() noexcept {
    // Destructor path: errors here have nowhere to go, and nothing useful could be done about them.
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (op) cublasLtMatmulDescDestroy(op);
    if (handle) cublasLtDestroy(handle);
    if (workspace) cudaFree(workspace);
    pref = nullptr, a = b = c = nullptr, op = nullptr, handle = nullptr, workspace = nullptr;
  }
};

namespace {

GemmAlgoInfo describe_algo(const cublasLtMatmulAlgo_t& algo) {
  GemmAlgoInfo i;
  size_t written = 0;
  DB_CUBLAS(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &i.algo_id, sizeof(i.algo_id),
                                                 &written));
  DB_CUBLAS(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &i.tile_id,
                                                 sizeof(i.tile_id), &written));
  DB_CUBLAS(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &i.stages_id,
                                                 sizeof(i.stages_id), &written));
  DB_CUBLAS(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &i.splitk,
                                                 sizeof(i.splitk), &written));
  DB_CUBLAS(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                                 &i.reduction_scheme, sizeof(i.reduction_scheme), &written));
  DB_CUBLAS(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &i.cta_swizzling,
                                                 sizeof(i.cta_swizzling), &written));
  DB_CUBLAS(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &i.custom_option,
                                                 sizeof(i.custom_option), &written));
  DB_CUBLAS(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &i.inner_shape_id,
                                                 sizeof(i.inner_shape_id), &written));
  DB_CUBLAS(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID,
                                                 &i.cluster_shape_id, sizeof(i.cluster_shape_id), &written));
  return i;
}

// Largest power of two (<= 256) dividing the address: what cuBLASLt's MIN_ALIGNMENT preferences describe.
unsigned pointer_alignment(const void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  unsigned a = 256;
  while (a > 1 && (v % a) != 0) a >>= 1;
  return a;
}

}  // namespace

QkvGemm::QkvGemm(const GemmShape& shape, const GemmOptions& opts) : shape_(shape), opts_(opts) {
  validate_gemm_shape(shape_, opts_.dtype);
  if (opts_.top_k < 1 || opts_.top_k > 64) throw UsageError("gemm: top_k must be in [1, 64]");
  if (opts_.sm_count_target < 0) throw UsageError("gemm: sm_count_target must be >= 0");
  if (opts_.tune_rounds < 1 || opts_.tune_reps < 1) throw UsageError("gemm: tune rounds/reps must be >= 1");
  if (!(opts_.tune_margin >= 0 && opts_.tune_margin < 0.5)) throw UsageError("gemm: tune_margin must be in [0, 0.5)");
  if (opts_.dtype == GemmDtype::bf16) opts_.fast_accum = false;  // meaningless there; keep reports honest
  const bool f8 = opts_.dtype == GemmDtype::fp8_e4m3;
  if (opts_.x_e5m2 && !f8) throw UsageError("gemm: an e5m2 X needs the fp8 dtype");
  if ((opts_.x_transposed || opts_.w_transposed) && f8)
    throw UsageError("gemm: fp8 operands must not be transposed (cuBLASLt's FP8 path is TN only; pass a transposed copy)");
  // A transposed operand's leading dimension is M (X) or N (W): 16-byte rows as for K.
  if (opts_.x_transposed && shape_.m % 16 != 0)
    throw UsageError("gemm: M=" + std::to_string(shape_.m) + " must be a multiple of 16 for a transposed X");

  impl_ = new Impl;
  try {
    DB_CUBLAS(cublasLtCreate(&impl_->handle));
    if (opts_.workspace_bytes > 0) DB_CUDA(cudaMalloc(&impl_->workspace, opts_.workspace_bytes));

    // fp32 accumulation and fp32 alpha/beta for both input types.
    DB_CUBLAS(cublasLtMatmulDescCreate(&impl_->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));

    // Layout mapping. cuBLASLt is column-major; a row-major R x C matrix with leading dimension C is, byte
    // for byte, the column-major C x R matrix (its transpose) with leading dimension C. So:
    //   X [M, K] row-major  ==  Xᵀ: column-major K x M, ld = K
    //   W [N, K] row-major  ==  Wᵀ: column-major K x N, ld = K
    //   Y [M, N] row-major  ==  Yᵀ: column-major N x M, ld = N
    // and Y = X·Wᵀ  <=>  Yᵀ = W·Xᵀ = (Wᵀ)ᵀ·Xᵀ. In cuBLASLt terms D = op(A)·op(B) with
    //   A = W buffer (stored K x N, ld K), op(A) = Aᵀ  -> transa = T, A is N x K after the op
    //   B = X buffer (stored K x M, ld K), op(B) = B   -> transb = N
    //   C = D = Y buffer (N x M column-major, ld N);    cuBLAS dims m = N, n = M, k = K.
    // That is exactly the "TN" form Hopper's FP8 kernels require (A transposed, B not), with both
    // operands K-contiguous; bf16 uses the same mapping. A's scale is s_w, B's is s_x.
    // A transposed operand (bf16 only) is the other view of its buffer: W stored [K, N] row-major is the
    // column-major N x K matrix (ld N), which is op(A) itself (transa = N); X stored [K, M] row-major is the
    // column-major M x K matrix (ld M), whose transpose is op(B) (transb = T).
    const cublasOperation_t transa = opts_.w_transposed ? CUBLAS_OP_N : CUBLAS_OP_T;
    const cublasOperation_t transb = opts_.x_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    DB_CUBLAS(cublasLtMatmulDescSetAttribute(impl_->op, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)));
    DB_CUBLAS(cublasLtMatmulDescSetAttribute(impl_->op, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)));
    if (opts_.dtype == GemmDtype::fp8_e4m3) {
      const int8_t fast = opts_.fast_accum ? 1 : 0;
      DB_CUBLAS(cublasLtMatmulDescSetAttribute(impl_->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
    }
    if (opts_.sm_count_target > 0) {
      const int32_t sms = opts_.sm_count_target;
      DB_CUBLAS(
          cublasLtMatmulDescSetAttribute(impl_->op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof(sms)));
    }

    const cudaDataType_t w_t = f8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    const cudaDataType_t x_t = opts_.x_e5m2 ? CUDA_R_8F_E5M2 : w_t;
    const auto m = static_cast<uint64_t>(shape_.m), n = static_cast<uint64_t>(shape_.n),
               k = static_cast<uint64_t>(shape_.k);
    if (opts_.w_transposed)
      DB_CUBLAS(cublasLtMatrixLayoutCreate(&impl_->a, w_t, n, k, static_cast<int64_t>(n)));
    else
      DB_CUBLAS(cublasLtMatrixLayoutCreate(&impl_->a, w_t, k, n, static_cast<int64_t>(k)));
    if (opts_.x_transposed)
      DB_CUBLAS(cublasLtMatrixLayoutCreate(&impl_->b, x_t, m, k, static_cast<int64_t>(m)));
    else
      DB_CUBLAS(cublasLtMatrixLayoutCreate(&impl_->b, x_t, k, m, static_cast<int64_t>(k)));
    // C and D share one layout: bf16 N x M, ld N (FP8 inputs with bf16 D need C bf16 too).
    DB_CUBLAS(cublasLtMatrixLayoutCreate(&impl_->c, CUDA_R_16BF, n, m, static_cast<int64_t>(n)));

    DB_CUBLAS(cublasLtMatmulPreferenceCreate(&impl_->pref));
    const uint64_t ws = opts_.workspace_bytes;
    DB_CUBLAS(cublasLtMatmulPreferenceSetAttribute(impl_->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                   sizeof(ws)));
  } catch (...) {
    impl_->destroy();
    delete impl_;
    impl_ = nullptr;
    throw;
  }
}

QkvGemm::~QkvGemm() {
  if (impl_) {
    impl_->destroy();
    delete impl_;
  }
}

void QkvGemm::bind(const void* x, const void* w, void* y, const float* scale_x, const float* scale_w) {
  if (!x || !w || !y) throw UsageError("gemm: bind() needs non-null x, w and y");
  const unsigned align = std::min(std::min(pointer_alignment(x), pointer_alignment(w)), pointer_alignment(y));
  if (align < 16) throw UsageError("gemm: x, w and y must be 16-byte aligned");
  const bool f8 = opts_.dtype == GemmDtype::fp8_e4m3;
  // Seen on an H200 with cuBLASLt 13.1: the heuristic accepts any scale pointer, but cublasLtMatmul answers
  // NOT_SUPPORTED when a scale pointer is only 4-byte aligned (256-byte aligned works). Refuse it up front.
  if (f8 && ((scale_x && pointer_alignment(scale_x) < 16) || (scale_w && pointer_alignment(scale_w) < 16)))
    throw UsageError("gemm: fp8 scale pointers must be 16-byte aligned (cuBLASLt refuses less)");
  impl_->x = x, impl_->w = w, impl_->y = y;
  if (f8) {
    impl_->scale_x = scale_x, impl_->scale_w = scale_w;
    // A is W, B is X (see the layout mapping in the constructor).
    DB_CUBLAS(cublasLtMatmulDescSetAttribute(impl_->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &impl_->scale_w,
                                             sizeof(impl_->scale_w)));
    DB_CUBLAS(cublasLtMatmulDescSetAttribute(impl_->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &impl_->scale_x,
                                             sizeof(impl_->scale_x)));
  }
  if (heur_align_ == 0 || align < heur_align_) {
    heur_align_ = align;
    query_heuristics();
  }
}

void QkvGemm::query_heuristics() {
  const uint32_t al = heur_align_;
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    DB_CUBLAS(cublasLtMatmulPreferenceSetAttribute(impl_->pref, attr, &al, sizeof(al)));

  std::vector<HeuristicBox> boxes(static_cast<size_t>(opts_.top_k));
  static_assert(sizeof(HeuristicBox) == sizeof(cublasLtMatmulHeuristicResult_t));
  auto* res = reinterpret_cast<cublasLtMatmulHeuristicResult_t*>(boxes.data());
  int found = 0;
  DB_CUBLAS(cublasLtMatmulAlgoGetHeuristic(impl_->handle, impl_->op, impl_->a, impl_->b, impl_->c, impl_->c,
                                           impl_->pref, opts_.top_k, res, &found));
  candidates_.clear();
  impl_->algos.clear();
  for (int i = 0; i < found; ++i) {
    if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
    GemmCandidate c;
    c.info = describe_algo(res[i].algo);
    c.info.workspace_bytes = res[i].workspaceSize;
    c.info.waves = res[i].wavesCount;
    c.info.heuristic_rank = i;
    candidates_.push_back(c);
    impl_->algos.push_back(AlgoBox{res[i].algo});
  }
  if (candidates_.empty())
    throw CudaError(std::string("gemm: cuBLASLt found no algorithm for ") + gemm_dtype_name(opts_.dtype) +
                    " M=" + std::to_string(shape_.m) + " N=" + std::to_string(shape_.n) +
                    " K=" + std::to_string(shape_.k));
  chosen_ = 0;
  tuned_ = false;
}

const GemmAlgoInfo& QkvGemm::algo() const {
  if (candidates_.empty()) throw UsageError("gemm: algo() before bind()");
  return candidates_[chosen_].info;
}

void QkvGemm::select(size_t i) {
  if (i >= candidates_.size())
    throw UsageError("gemm: select(" + std::to_string(i) + "): only " + std::to_string(candidates_.size()) +
                     " candidates");
  if (candidates_[i].failed) throw UsageError("gemm: select(" + std::to_string(i) + "): cuBLASLt refused it");
  chosen_ = i;
}

void QkvGemm::run(cudaStream_t stream) const {
  if (candidates_.empty()) throw UsageError("gemm: run() before bind()");
  const float alpha = 1.f, beta = 0.f;
  DB_CUBLAS(cublasLtMatmul(impl_->handle, impl_->op, &alpha, impl_->w, impl_->a, impl_->x, impl_->b, &beta,
                           impl_->y, impl_->c, impl_->y, impl_->c, &impl_->algos[chosen_].algo, impl_->workspace,
                           opts_.workspace_bytes, stream));
}

void QkvGemm::tune(cudaStream_t stream) {
  if (candidates_.empty()) throw UsageError("gemm: tune() before bind()");
  if (opts_.top_k <= 1 || candidates_.size() <= 1) return;  // nothing to choose between
  const float alpha = 1.f, beta = 0.f;
  auto launch = [&](size_t i) {
    return cublasLtMatmul(impl_->handle, impl_->op, &alpha, impl_->w, impl_->a, impl_->x, impl_->b, &beta,
                          impl_->y, impl_->c, impl_->y, impl_->c, &impl_->algos[i].algo, impl_->workspace,
                          opts_.workspace_bytes, stream);
  };
  cudaEvent_t ev0 = nullptr, ev1 = nullptr;
  DB_CUDA(cudaEventCreate(&ev0));
  DB_CUDA(cudaEventCreate(&ev1));
  // Mean time of `reps` back-to-back launches of candidate i (the GPU never idles between them, so host
  // launch overhead stays hidden, as in any pipeline that enqueues ahead).
  auto time_it = [&](size_t i, int reps) {
    DB_CUDA(cudaEventRecord(ev0, stream));
    for (int r = 0; r < reps; ++r) DB_CUBLAS(launch(i));
    DB_CUDA(cudaEventRecord(ev1, stream));
    DB_CUDA(cudaEventSynchronize(ev1));
    float ms = 0;
    DB_CUDA(cudaEventElapsedTime(&ms, ev0, ev1));
    return static_cast<double>(ms) / reps;
  };
  try {
    // Warm-up: every candidate once (loads its kernel, weeds out refusals).
    for (size_t i = 0; i < candidates_.size(); ++i) {
      candidates_[i].ms = -1;
      candidates_[i].failed = launch(i) != CUBLAS_STATUS_SUCCESS;
    }
    DB_CUDA_LAUNCH();
    size_t first_ok = candidates_.size();
    for (size_t i = 0; i < candidates_.size() && first_ok == candidates_.size(); ++i)
      if (!candidates_[i].failed) first_ok = i;
    if (first_ok == candidates_.size()) throw CudaError("gemm: cuBLASLt refused every heuristic candidate");
    // A few more runs of the first usable one bring the clocks up and give the rough time of one GEMM, from
    // which each timed batch is sized to >= ~2 ms (short GEMMs are otherwise dominated by event jitter).
    const double t_est = time_it(first_ok, 4);
    const int reps = std::clamp(static_cast<int>(2.0 / std::max(t_est, 1e-3)), opts_.tune_reps, 256);
    // Round-robin rounds, so slow drifts (clock, power, temperature) hit every candidate alike; each
    // candidate's best round counts.
    for (int round = 0; round < opts_.tune_rounds; ++round)
      for (size_t i = 0; i < candidates_.size(); ++i) {
        if (candidates_[i].failed) continue;
        const double per = time_it(i, reps);
        if (candidates_[i].ms < 0 || per < candidates_[i].ms) candidates_[i].ms = per;
      }
  } catch (...) {
    cudaEventDestroy(ev0);
    cudaEventDestroy(ev1);
    throw;
  }
  DB_CUDA(cudaEventDestroy(ev0));
  DB_CUDA(cudaEventDestroy(ev1));

  // The heuristic's own first usable choice stays unless the fastest is more than tune_margin faster:
  // smaller differences are within run-to-run noise, and a noisy pick can be slower than the default.
  size_t def = candidates_.size(), fastest = candidates_.size();
  for (size_t i = 0; i < candidates_.size(); ++i) {
    if (candidates_[i].failed) continue;
    if (def == candidates_.size()) def = i;
    if (fastest == candidates_.size() || candidates_[i].ms < candidates_[fastest].ms) fastest = i;
  }
  const size_t best = candidates_[fastest].ms < candidates_[def].ms * (1.0 - opts_.tune_margin) ? fastest : def;
  chosen_ = best;
  tuned_ = true;
}

size_t QkvGemm::cublaslt_version() { return cublasLtGetVersion(); }

std::string QkvGemm::cublaslt_version_string() {
  // CUBLAS_VERSION layout: major * 10000 + minor * 100 + patch (e.g. 130100 = 13.1.0). 0 is the loader's answer
  // when no usable library was found.
  const size_t v = cublasLtGetVersion();
  if (v == 0) return "unavailable";
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

// ---------------------------------------------------------------------------------------------------------
// QkvBuffers
// ---------------------------------------------------------------------------------------------------------
namespace {

// splitmix64's step: the golden-ratio increment, then the finaliser.
__device__ __forceinline__ uint64_t splitmix(uint64_t z) { return mix64(z + 0x9e3779b97f4a7c15ULL); }

// Uniform in [-1, 1), 24 random bits.
__device__ __forceinline__ float hashed_uniform(uint64_t seed, uint64_t i) {
  const uint32_t bits = static_cast<uint32_t>(splitmix(seed ^ splitmix(i)) >> 40);
  return static_cast<float>(bits) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void fill_fp8_kernel(__nv_fp8_e4m3* p, uint64_t n, uint64_t seed, float inv_scale) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n; i += uint64_t{gridDim.x} * blockDim.x) {
    float v = hashed_uniform(seed, i) * inv_scale;
    // Keep clear of zero: a value that would quantise to 0 becomes the smallest normal of its sign.
    if (fabsf(v) < 0.015625f) v = v < 0 ? -0.015625f : 0.015625f;
    p[i] = __nv_fp8_e4m3(v);
  }
}

__global__ void fill_bf16_kernel(__nv_bfloat16* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n; i += uint64_t{gridDim.x} * blockDim.x) {
    float v = hashed_uniform(seed, i);
    if (fabsf(v) < 1e-3f) v = v < 0 ? -1e-3f : 1e-3f;
    p[i] = __float2bfloat16(v);
  }
}

void fill(void* p, GemmDtype d, uint64_t n, uint64_t seed, float inv_scale, cudaStream_t stream) {
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<uint64_t>((n + threads - 1) / threads, 132 * 32));
  if (d == GemmDtype::fp8_e4m3)
    fill_fp8_kernel<<<blocks, threads, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(p), n, seed, inv_scale);
  else
    fill_bf16_kernel<<<blocks, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(p), n, seed);
  DB_CUDA_LAUNCH();
}

}  // namespace

size_t QkvBuffers::bytes_needed(const GemmShape& s, GemmDtype d) {
  const auto m = static_cast<size_t>(s.m), n = static_cast<size_t>(s.n), k = static_cast<size_t>(s.k);
  return (m * k + n * k) * gemm_input_bytes(d) + m * n * 2 + 2 * kScaleStride * sizeof(float);
}

QkvBuffers::QkvBuffers(const GemmShape& s, GemmDtype d) : shape(s), dtype(d) {
  const auto m = static_cast<size_t>(s.m), n = static_cast<size_t>(s.n), k = static_cast<size_t>(s.k);
  try {
    DB_CUDA(cudaMalloc(&x, m * k * gemm_input_bytes(d)));
    DB_CUDA(cudaMalloc(&w, n * k * gemm_input_bytes(d)));
    DB_CUDA(cudaMalloc(&y, m * n * 2));
    DB_CUDA(cudaMalloc(reinterpret_cast<void**>(&scales), 2 * kScaleStride * sizeof(float)));
  } catch (...) {
    release();
    throw;
  }
}

void QkvBuffers::release() {
  // Frees in a destructor/unwind path: a failure here is not actionable.
  if (x) cudaFree(x);
  if (w) cudaFree(w);
  if (y) cudaFree(y);
  if (scales) cudaFree(scales);
  x = w = y = nullptr;
  scales = nullptr;
}

QkvBuffers::~QkvBuffers() { release(); }

QkvBuffers::QkvBuffers(QkvBuffers&& o) noexcept { *this = std::move(o); }

QkvBuffers& QkvBuffers::operator=(QkvBuffers&& o) noexcept {
  if (this != &o) {
    release();
    shape = o.shape, dtype = o.dtype, x = o.x, w = o.w, y = o.y, scales = o.scales;
    o.x = o.w = o.y = nullptr;
    o.scales = nullptr;
  }
  return *this;
}

void QkvBuffers::randomize(uint64_t seed, cudaStream_t stream) {
  const auto m = static_cast<uint64_t>(shape.m), n = static_cast<uint64_t>(shape.n),
             k = static_cast<uint64_t>(shape.k);
  const bool f8 = dtype == GemmDtype::fp8_e4m3;
  // fp8: stored value = v / s (amax 300 resp. 200), real value = s * stored.
  const float h_sx = f8 ? 1.f / 300.f : 1.f, h_sw = f8 ? 1.f / 200.f : 1.f;
  fill(x, dtype, m * k, seed * 2 + 1, 300.f, stream);
  fill(w, dtype, n * k, seed * 2 + 2, 200.f, stream);
  DB_CUDA(cudaMemcpyAsync(scale_x(), &h_sx, sizeof(float), cudaMemcpyHostToDevice, stream));
  DB_CUDA(cudaMemcpyAsync(scale_w(), &h_sw, sizeof(float), cudaMemcpyHostToDevice, stream));
  // h_sx / h_sw live on this stack frame: finish the copy before returning.
  DB_CUDA(cudaStreamSynchronize(stream));
}

void QkvBuffers::poison_output(cudaStream_t stream) {
  DB_CUDA(cudaMemsetAsync(y, 0xFF, static_cast<size_t>(shape.m) * static_cast<size_t>(shape.n) * 2, stream));
}

}  // namespace dropbench
