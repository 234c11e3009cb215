#pragma once
// How a decoder layer runs its projections: the scalar reference, oneDNN, or our GEMV.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/dnnl_matmul.hpp"
#include "kernels/isa.hpp"
#include "kernels/units/compute_unit.hpp"
#include "kernels/weights/gemm_bf16_amx_blocked.hpp"
#include "kernels/weights/weight_dtype.hpp"

namespace kvscope {

// y[m × w.rows] = x[m × w.cols] · Wᵀ, W [out × in] row-major in its stored type (Hugging
// Face layout), read in place:
//   Isa::scalar: matmul_ref, so the scalar layer stays a plain reference end to end.
//   m = 1 (decode): kDecodeUsesGemv picks our xsimd GEMV (kernels/weights/gemv.hpp) or
//   oneDNN, whichever bench/projection_bench measured faster (see the numbers there). The
//   GEMV widens f16/bf16 weights in registers: exact in `exact` mode; in `fast` mode, bf16
//   weights on AVX512-BF16 go through gemv_bf16_dot (x rounded to bf16).
//   m > 1 (prefill, batches), oneDNN matmul, one cached primitive per shape:
//     f32 weights: f32 matmul.
//     bf16 weights, ComputeMode::fast: x rounded to bf16, bf16 × bf16 → f32 on the CPU's
//       bf16 units (AVX512-BF16, AMX-BF16) where oneDNN finds them; batches of up to
//       kSmallBatchRows rows through our kernels instead, each reading the weights once for
//       the batch: on AMX-BF16 tiles (gemm_bf16_amx, 2–16 rows, rows of W in whole 32-element
//       steps) where Linux grants them, else on AVX512-BF16 (gemm_bf16_dot, each row's result
//       bit for bit its GEMV's; up to kDotBatchRows = 32 rows on CPUs without AMX, where it
//       also beats oneDNN there); larger ones (prefill) on AMX-BF16 through our blocked
//       kernel (gemm_bf16_amx_blocked, 1.6–2.2× oneDNN 2.6's AMX matmul here) where it
//       fits, else oneDNN. Where oneDNN has no bf16 matmul (CPUs without AVX-512), as exact.
//     otherwise (exact, or f16): a block of W's rows at a time widened into an f32 scratch
//       of at most kWidenBlockBytes and multiplied in f32, so x stays f32 and no f32 copy
//       of W is ever whole.
class Projector {
 public:
  static constexpr std::size_t kWidenBlockBytes = 8u << 20;

  Projector(Isa isa, int threads, ComputeMode compute = ComputeMode::exact,
            std::size_t widen_block_bytes = kWidenBlockBytes)
      : isa_(isa), threads_(threads), compute_(compute), widen_block_bytes_(widen_block_bytes) {}

  void operator()(const float* x, const WeightsView& w, std::size_t m, float* y);
  // Allocates and touches the scratch of products of up to m rows of x against weights of
  // up to `rows` × `cols`, so that the first such product pays no page faults.
  void reserve(std::size_t m, std::size_t rows, std::size_t cols);

  const DnnlMatmul& dnnl() const { return dnnl_; }
  // Wall time spent in projections since construction (what share of a step reads weights).
  double seconds() const { return seconds_; }

 private:
  void multiply(const float* x, const WeightsView& w, std::size_t m, float* y);
  void multiply_widened(const float* x, const WeightsView& w, std::size_t m, float* y);
  void multiply_bf16(const float* x, const WeightsView& w, std::size_t m, float* y);

  Isa isa_;
  int threads_;
  ComputeMode compute_;
  std::size_t widen_block_bytes_;
  DnnlMatmul dnnl_;
  std::vector<float> widened_;         // a block of W's rows in f32
  std::vector<std::uint16_t> x_bf16_;  // x rounded to bf16
  AmxGemmScratch amx_scratch_;
  double seconds_ = 0;
};

}  // namespace kvscope
