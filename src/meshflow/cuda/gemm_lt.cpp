// cuBLASLt GEMM (see gemm_lt.h): one handle and one 32 MiB workspace per device (both kept for
// the life of the process), and the heuristic's algorithm cached per problem (dtype,
// transposes, M, N, K, leading dimensions, beta == 0, epilogue, pointer alignments).
//
// f32 runs with CUBLAS_COMPUTE_32F (true f32, no TF32) unless MESHFLOW_ALLOW_TF32=1; bf16/f16
// with f32 accumulation and f32 alpha/beta; f64 with CUBLAS_COMPUTE_64F.
#include "meshflow/cuda/gemm_lt.h"

#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "meshflow/core/device.h"
#include "meshflow/core/error.h"
#include "meshflow/cuda/runtime.h"
#include "meshflow/tensor/allocator.h"

namespace mf::cuda {
namespace {

constexpr size_t kWorkspaceNbytes = size_t(32) << 20;

std::string describe(const LtGemm& g) {
  std::ostringstream s;
  s << g.op << " (cuBLASLt): " << dtype_name(g.dtype) << " M=" << g.m << " N=" << g.n << " K=" << g.k
    << " trans_a=" << g.trans_a << " trans_b=" << g.trans_b << " lda=" << g.lda << " ldb=" << g.ldb
    << " ldc=" << g.ldc << " alpha=" << g.alpha << " beta=" << g.beta << " bias=" << (g.bias ? "yes" : "no")
    << " act=" << static_cast<int>(g.act) << " pre_act=" << (g.pre_act ? "yes" : "no");
  return s.str();
}

void lt_check(cublasStatus_t st, const char* call, const LtGemm& g) {
  MF_CHECK(st == CUBLAS_STATUS_SUCCESS, call, " failed: ", cublasLtGetStatusString(st), " (", static_cast<int>(st),
           ") in ", describe(g));
}

bool allow_tf32() {
  static const bool allow = [] {
    const char* e = std::getenv("MESHFLOW_ALLOW_TF32");
    return e != nullptr && std::strcmp(e, "1") == 0;
  }();
  return allow;
}

// The largest power of two (at most 256) dividing the address: what cuBLASLt may assume.
uint32_t alignment_of(const void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  if (v == 0) return 256;
  uintptr_t low = v & (~v + 1);
  return static_cast<uint32_t>(low >= 256 ? 256 : low);
}

struct TypeInfo {
  cudaDataType_t data;
  cudaDataType_t scale;
  cublasComputeType_t compute;
};
TypeInfo type_info(const LtGemm& g) {
  switch (g.dtype) {
    case DType::kF32:
      return {CUDA_R_32F, CUDA_R_32F, allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    case DType::kF64: return {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F};
    case DType::kBF16: return {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case DType::kF16: return {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    default: break;
  }
  MF_THROW(g.op, ": no CUDA GEMM for dtype ", dtype_name(g.dtype), " (f32, f64, bf16, f16 only)");
}

cublasLtEpilogue_t epilogue_of(const LtGemm& g) {
  if (g.act == GemmAct::kNone) return g.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  if (g.pre_act) return g.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  return g.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
}

// ---- RAII around the cuBLASLt descriptors (created per call: host-only and cheap).
struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  ~MatmulDesc() { if (d) cublasLtMatmulDescDestroy(d); }
};
struct Layout {
  cublasLtMatrixLayout_t d = nullptr;
  ~Layout() { if (d) cublasLtMatrixLayoutDestroy(d); }
};
struct Preference {
  cublasLtMatmulPreference_t d = nullptr;
  ~Preference() { if (d) cublasLtMatmulPreferenceDestroy(d); }
};

using AlgoKey = std::array<int64_t, 20>;
struct AlgoKeyHash {
  size_t operator()(const AlgoKey& k) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
    for (int64_t v : k) {
      h ^= static_cast<uint64_t>(v);
      h *= 1099511628211ull;
    }
    return static_cast<size_t>(h);
  }
};

struct DeviceState {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::unordered_map<AlgoKey, cublasLtMatmulAlgo_t, AlgoKeyHash> algos;
};

std::mutex g_mutex;  // guards g_states and every DeviceState (the whole call is short host work)
std::vector<std::unique_ptr<DeviceState>> g_states;

DeviceState& state_locked(int device, const LtGemm& g) {
  MF_CHECK(device >= 0, g.op, ": bad current CUDA device ", device);
  if (static_cast<size_t>(device) >= g_states.size()) g_states.resize(static_cast<size_t>(device) + 1);
  auto& st = g_states[static_cast<size_t>(device)];
  if (!st) {
    auto fresh = std::make_unique<DeviceState>();
    lt_check(cublasLtCreate(&fresh->handle), "cublasLtCreate", g);
    fresh->workspace = allocator_for(Device{DeviceType::kCUDA, device}).allocate(kWorkspaceNbytes);
    st = std::move(fresh);  // handle and workspace are never released
  }
  return *st;
}

void check_args(const LtGemm& g) {
  MF_CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0, describe(g), ": negative size");
  const int64_t a_cols = g.trans_a ? g.m : g.k, b_cols = g.trans_b ? g.k : g.n;
  if (g.m > 0 && g.n > 0) {  // nothing is read or written otherwise; K = 0 reads only C
    MF_CHECK(g.ldc >= g.n, describe(g), ": ldc must be >= ", g.n);
    if (g.k > 0) {
      MF_CHECK(g.lda >= std::max<int64_t>(1, a_cols), describe(g), ": lda must be >= ", std::max<int64_t>(1, a_cols));
      MF_CHECK(g.ldb >= std::max<int64_t>(1, b_cols), describe(g), ": ldb must be >= ", std::max<int64_t>(1, b_cols));
    }
  }
  MF_CHECK(g.act == GemmAct::kNone || g.act == GemmAct::kGeluTanh, describe(g), ": unknown activation");
  MF_CHECK(g.pre_act == nullptr || g.act != GemmAct::kNone, describe(g), ": pre_act needs an activation");
  MF_CHECK(g.pre_act == nullptr || g.n % 8 == 0, describe(g),
           ": pre_act needs N divisible by 8 (cuBLASLt's auxiliary leading dimension)");
  if (g.m > 0 && g.n > 0) MF_CHECK(g.c != nullptr, describe(g), ": C is null");
  if (g.m > 0 && g.n > 0 && g.k > 0) MF_CHECK(g.a != nullptr && g.b != nullptr, describe(g), ": A or B is null");
}

}  // namespace

void lt_gemm(const LtGemm& g) {
  check_args(g);
  const TypeInfo ti = type_info(g);
  if (g.m == 0 || g.n == 0) return;
  const size_t esz = dtype_nbytes(g.dtype);
  cudaStream_t stream = compute_stream();
  if (g.k == 0) {  // C = beta * C (the CPU kernels' rule); cuBLASLt does not take K = 0
    MF_CHECK(!g.bias && g.act == GemmAct::kNone, describe(g), ": K = 0 with an epilogue is not supported");
    if (g.beta == 0.0) {
      MF_CUDA_CHECK(cudaMemset2DAsync(g.c, static_cast<size_t>(g.ldc) * esz, 0, static_cast<size_t>(g.n) * esz,
                                      static_cast<size_t>(g.m), stream));
      return;
    }
    MF_CHECK(g.beta == 1.0, describe(g), ": K = 0 supports beta 0 or 1 only");
    return;
  }

  std::lock_guard<std::mutex> lock(g_mutex);
  const int device = current_device();
  DeviceState& st = state_locked(device, g);

  // Column-major view: D(N,M) = op(B') op(A'), B' = our B, A' = our A.
  MatmulDesc desc;
  lt_check(cublasLtMatmulDescCreate(&desc.d, ti.compute, ti.scale), "cublasLtMatmulDescCreate", g);
  const cublasOperation_t op_lt_a = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_lt_b = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  lt_check(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSA, &op_lt_a, sizeof(op_lt_a)),
           "set TRANSA", g);
  lt_check(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSB, &op_lt_b, sizeof(op_lt_b)),
           "set TRANSB", g);
  const cublasLtEpilogue_t epi = epilogue_of(g);
  lt_check(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), "set EPILOGUE",
           g);
  if (g.bias) {
    const void* bias = g.bias;
    lt_check(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
             "set BIAS_POINTER", g);
  }
  if (g.pre_act) {
    void* aux = g.pre_act;
    const int64_t aux_ld = g.n;
    lt_check(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)),
             "set EPILOGUE_AUX_POINTER", g);
    lt_check(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)),
             "set EPILOGUE_AUX_LD", g);
  }

  Layout la, lb, lc;
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  lt_check(cublasLtMatrixLayoutCreate(&la.d, ti.data, u(g.trans_b ? g.k : g.n), u(g.trans_b ? g.n : g.k), g.ldb),
           "cublasLtMatrixLayoutCreate(B)", g);
  lt_check(cublasLtMatrixLayoutCreate(&lb.d, ti.data, u(g.trans_a ? g.m : g.k), u(g.trans_a ? g.k : g.m), g.lda),
           "cublasLtMatrixLayoutCreate(A)", g);
  lt_check(cublasLtMatrixLayoutCreate(&lc.d, ti.data, u(g.n), u(g.m), g.ldc), "cublasLtMatrixLayoutCreate(C)", g);

  const uint32_t al_a = alignment_of(g.a), al_b = alignment_of(g.b), al_c = alignment_of(g.c);
  const AlgoKey key = {static_cast<int64_t>(g.dtype), g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda, g.ldb, g.ldc,
                       g.beta == 0.0, static_cast<int64_t>(epi), al_a, al_b, al_c,
                       static_cast<int64_t>(alignment_of(g.bias)), static_cast<int64_t>(alignment_of(g.pre_act)),
                       static_cast<int64_t>(ti.compute), 0, 0, 0};
  auto it = st.algos.find(key);
  if (it == st.algos.end()) {
    Preference pref;
    lt_check(cublasLtMatmulPreferenceCreate(&pref.d), "cublasLtMatmulPreferenceCreate", g);
    const size_t ws = kWorkspaceNbytes;
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref.d, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
             "set MAX_WORKSPACE_BYTES", g);
    // Lt's A is our B, its B our A; C and D are both our C.
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_b,
                                                  sizeof(al_b)),
             "set MIN_ALIGNMENT_A_BYTES", g);
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_a,
                                                  sizeof(al_a)),
             "set MIN_ALIGNMENT_B_BYTES", g);
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c,
                                                  sizeof(al_c)),
             "set MIN_ALIGNMENT_C_BYTES", g);
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c,
                                                  sizeof(al_c)),
             "set MIN_ALIGNMENT_D_BYTES", g);
    cublasLtMatmulHeuristicResult_t result;
    std::memset(&result, 0, sizeof(result));
    int count = 0;
    lt_check(cublasLtMatmulAlgoGetHeuristic(st.handle, desc.d, la.d, lb.d, lc.d, lc.d, pref.d, 1, &result, &count),
             "cublasLtMatmulAlgoGetHeuristic", g);
    MF_CHECK(count > 0 && result.state == CUBLAS_STATUS_SUCCESS, describe(g),
             ": cuBLASLt has no algorithm for this problem (alignments A ", al_a, " B ", al_b, " C ", al_c, " bytes)");
    it = st.algos.emplace(key, result.algo).first;
  }

  const float alpha32 = static_cast<float>(g.alpha), beta32 = static_cast<float>(g.beta);
  const bool f64 = ti.scale == CUDA_R_64F;
  const void* alpha = f64 ? static_cast<const void*>(&g.alpha) : static_cast<const void*>(&alpha32);
  const void* beta = f64 ? static_cast<const void*>(&g.beta) : static_cast<const void*>(&beta32);
  lt_check(cublasLtMatmul(st.handle, desc.d, alpha, g.b, la.d, g.a, lb.d, beta, g.c, lc.d, g.c, lc.d, &it->second,
                          st.workspace, kWorkspaceNbytes, stream),
           "cublasLtMatmul", g);
}

}  // namespace mf::cuda
