#include "engine/projector.hpp"

#include <algorithm>
#include <chrono>

#include "kernels/number_formats.hpp"
#include "kernels/ref/layer_ops_ref.hpp"
#include "kernels/units/cpu_features.hpp"
#include "kernels/weights/gemm_bf16_amx.hpp"
#include "kernels/weights/gemm_bf16_amx_blocked.hpp"
#include "kernels/weights/gemv.hpp"
#include "kernels/weights/gemv_bf16_dot.hpp"

namespace kvscope {

// Decode-step choice, from bench/projection_bench on a 2-core Zen 4 (AVX-512), 2 threads,
// medians of 5, one run (a shared, loaded machine; both paths are bound by reading W):
//   weights k × n     oneDNN (brg:avx512_core)   xsimd GEMV (avx512)
//   4096 × 4096         11.98 ms                   12.16 ms    (equal within noise)
//   4096 × 11008        35.29 ms                   23.23 ms    (GEMV 1.52× faster)
//   11008 × 4096        25.78 ms                   23.19 ms    (GEMV 1.11× faster)
// GEMV is never slower, so the decode step uses it.
constexpr bool kDecodeUsesGemv = true;

// Rows up to which a bf16 batch (decode of B sequences) reads the weights with our
// AVX512-BF16 kernel, each line once for all rows, rather than oneDNN's matmul.
// bench/projection_bench BM_SmallBatch, 4096 × 11008 bf16, 2 threads, Zen 5 VM (busy: a
// build ran beside it), medians of 3 interleaved: ours / oneDNN 2.37 / 5.47 ms at 1 row,
// 4.18 / 5.95 at 8, 12.5 / 9.99 at 32, 19.3 / 14.9 at 64 (oneDNN's blocking wins once the
// batch is compute-bound). On the Intel Xeon with AMX (2026-12-02, 2 threads, medians of 3):
// AMX tiles / AVX512-BF16 / oneDNN 2.37 / 4.57 / 3.52 ms at 8 rows, 2.38 / 8.93 / 3.84 at 16.
constexpr std::size_t kSmallBatchRows = 16;
// On CPUs without AMX, our AVX512-BF16 kernel keeps a batch up to this many rows: in tiles of
// 8 rows (2026-12-05) it also beats oneDNN at 32. BM_SmallBatch, AMD Zen 4, 2 threads,
// medians of 3, ours / oneDNN: 4.86 / 6.88 ms at 16 rows, 8.11 / 9.91 at 32, 15.5 / 16.3 at
// 64 (within the noise: oneDNN keeps 33 and more).
constexpr std::size_t kDotBatchRows = 32;

void Projector::operator()(const float* x, const WeightsView& w, std::size_t m, float* y) {
  const auto start = std::chrono::steady_clock::now();
  multiply(x, w, m, y);
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void Projector::reserve(std::size_t m, std::size_t rows, std::size_t cols) {
  if (m > kSmallBatchRows && compute_ == ComputeMode::fast && cpu_has(ComputeUnit::amx_bf16)) {
    amx_scratch_.reserve(m, WeightsView{nullptr, WeightDtype::bf16, rows, cols}, threads_);
  }
}

void Projector::multiply(const float* x, const WeightsView& w, std::size_t m, float* y) {
  if (isa_ == Isa::scalar) return matmul_ref(x, w, m, y, threads_);
  if (m == 1 && kDecodeUsesGemv) {
    if (w.dtype == WeightDtype::bf16 && compute_ == ComputeMode::fast && isa_ == Isa::avx512 &&
        cpu_features().avx512_bf16) {
      return gemv_bf16_dot(x, w, y, threads_);
    }
    return gemv(x, w, y, isa_, threads_);
  }
  if (w.dtype == WeightDtype::f32) {
    return dnnl_.multiply(x, static_cast<const float*>(w.data), m, w.cols, w.rows, y, threads_);
  }
  // Without a bf16 matrix unit (oneDNN has no bf16 matmul below AVX-512) fast runs exact.
  if (w.dtype == WeightDtype::bf16 && compute_ == ComputeMode::fast && DnnlMatmul::has_bf16()) {
    const std::size_t small_rows = cpu_features().amx_bf16 ? kSmallBatchRows : kDotBatchRows;
    if (m <= small_rows && isa_ == Isa::avx512 && cpu_features().avx512_bf16) {
      if (cpu_has(ComputeUnit::amx_bf16) && gemm_bf16_amx_fits(m, w)) {
        return gemm_bf16_amx(x, m, w, y, threads_);
      }
      return gemm_bf16_dot(x, m, w, y, threads_);
    }
    if (cpu_has(ComputeUnit::amx_bf16) && gemm_bf16_amx_blocked_fits(m, w)) {
      return gemm_bf16_amx_blocked(x, m, w, y, threads_, amx_scratch_);
    }
    return multiply_bf16(x, w, m, y);
  }
  multiply_widened(x, w, m, y);
}

void Projector::multiply_bf16(const float* x, const WeightsView& w, std::size_t m, float* y) {
  x_bf16_.resize(m * w.cols);
  for (std::size_t i = 0; i < x_bf16_.size(); ++i) x_bf16_[i] = f32_to_bf16_bits(x[i]);
  dnnl_.multiply_bf16(x_bf16_.data(), static_cast<const std::uint16_t*>(w.data), m, w.cols, w.rows,
                      y, threads_);
}

void Projector::multiply_widened(const float* x, const WeightsView& w, std::size_t m, float* y) {
  // Rows per block: a multiple of 16 (oneDNN's column blocking) within kWidenBlockBytes.
  const std::size_t by_bytes = widen_block_bytes_ / (w.cols * sizeof(float));
  const std::size_t block = std::min(w.rows, std::max<std::size_t>(16, by_bytes / 16 * 16));
  widened_.resize(block * w.cols);
  const auto* bits = static_cast<const std::uint16_t*>(w.data);
  const bool bf16 = w.dtype == WeightDtype::bf16;
  for (std::size_t first = 0; first < w.rows; first += block) {
    const std::size_t rows = std::min(block, w.rows - first);
    const std::uint16_t* src = bits + first * w.cols;
    const auto count = static_cast<long>(rows * w.cols);
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (long i = 0; i < count; ++i) {
      widened_[i] = bf16 ? bf16_bits_to_f32(src[i]) : f16_bits_to_f32(src[i]);
    }
    dnnl_.multiply(x, widened_.data(), m, w.cols, rows, y + first, threads_, w.rows);
  }
}

}  // namespace kvscope
