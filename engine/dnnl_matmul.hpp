#pragma once
// Projections through oneDNN matmul primitives, one primitive per shape and type, created once.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kvscope {

// y[m × n] (row stride ldy ≥ n) = x[m × k] · Wᵀ with W stored [n × k] row-major (Hugging
// Face layout). The weights are passed to oneDNN as a k × n matrix in "ba" (transposed)
// layout, so no copy of W is kept. Primitives are cached by shape and types; not
// thread-safe (one per layer).
class DnnlMatmul {
 public:
  DnnlMatmul();
  ~DnnlMatmul();
  DnnlMatmul(DnnlMatmul&&) noexcept;
  DnnlMatmul& operator=(DnnlMatmul&&) noexcept;

  // All f32. Runs on `threads` OpenMP threads (oneDNN's OpenMP runtime follows the calling
  // thread's omp_set_num_threads, restored afterwards). Throws std::runtime_error with
  // oneDNN's message if no primitive exists for the shape.
  void multiply(const float* x, const float* w, std::size_t m, std::size_t k, std::size_t n,
                float* y, int threads, std::size_t ldy = 0);

  // x and W as bf16 bit patterns, y in f32: the CPU's bf16 units (AVX512-BF16, AMX-BF16)
  // where oneDNN finds them. Throws std::runtime_error where has_bf16() is false.
  void multiply_bf16(const std::uint16_t* x, const std::uint16_t* w, std::size_t m, std::size_t k,
                     std::size_t n, float* y, int threads);

  // Whether oneDNN has a bf16 matmul on this CPU: oneDNN 2.6 has none below AVX-512
  // (avx512_core), e.g. on AMD Zen 3 or an AVX2 laptop. Probed once with a small primitive.
  static bool has_bf16();

  // Primitives created so far (one per distinct shape and type).
  std::size_t cached_primitives() const;

  // The name of the implementation oneDNN chose for the f32 (or bf16) shape, e.g.
  // "brg:avx512_core".
  std::string implementation(std::size_t m, std::size_t k, std::size_t n, bool bf16 = false);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvscope
