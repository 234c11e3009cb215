#pragma once
// Projections through oneDNN matmul primitives, one primitive per shape, created once.
#include <cstddef>
#include <memory>
#include <string>

namespace kvscope {

// y[m × n] = x[m × k] · Wᵀ with W stored [n × k] row-major (Hugging Face layout), all f32.
// The weights are passed to oneDNN as a k × n matrix in "ba" (transposed) layout, so no
// copy of W is kept. Primitives are cached by (m, k, n); not thread-safe (one per layer).
class DnnlMatmul {
 public:
  DnnlMatmul();
  ~DnnlMatmul();
  DnnlMatmul(DnnlMatmul&&) noexcept;
  DnnlMatmul& operator=(DnnlMatmul&&) noexcept;

  // Runs on `threads` OpenMP threads (oneDNN's OpenMP runtime follows the calling thread's
  // omp_set_num_threads, restored afterwards). Throws std::runtime_error with oneDNN's
  // message if no primitive exists for the shape.
  void multiply(const float* x, const float* w, std::size_t m, std::size_t k, std::size_t n,
                float* y, int threads);

  // Primitives created so far (one per distinct shape).
  std::size_t cached_primitives() const;

  // The name of the implementation oneDNN chose for the shape, e.g. "brg:avx512_core".
  std::string implementation(std::size_t m, std::size_t k, std::size_t n);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvscope
