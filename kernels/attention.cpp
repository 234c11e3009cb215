#include "kernels/attention.hpp"

#include <stdexcept>
#include <string>

#include "kernels/attention_kernels.hpp"
#include "kernels/ref/attention_ref.hpp"

namespace kvscope {

// Dispatch once per call on the Isa argument; the per-ISA kernels live in kernels/arch/.
void attend(const AttentionProblem& problem, Isa isa, int threads, ComputeMode mode) {
  if (problem.kv.n_kv_heads == 0 || problem.n_heads % problem.kv.n_kv_heads != 0) {
    throw std::invalid_argument("attention: n_heads " + std::to_string(problem.n_heads) +
                                " is not a multiple of n_kv_heads " +
                                std::to_string(problem.kv.n_kv_heads));
  }
  require_cpu_supports(isa, "attention: ");
  const std::size_t group = problem.n_heads / problem.kv.n_kv_heads;
  const ComputeUnit unit =
      attention_compute_unit(problem.kv.types(), isa, mode, problem.n_queries * group,
                             problem.kv.head_dim, problem.kv.paged() ? problem.kv.page_tokens : 0);
  if (unit != ComputeUnit::fp32_fma) return simd::attend_dot_unit(problem, unit, threads);
  switch (isa) {
    case Isa::scalar:
      return attend_ref(problem, threads < 1 ? 1 : threads);
    case Isa::sse2:
      return simd::attend_arch<xsimd::sse2>(problem, threads);
    case Isa::avx2:
      return simd::attend_arch<simd::avx2_fma>(problem, threads);
    case Isa::avx512:
      return simd::attend_arch<xsimd::avx512bw>(problem, threads);
  }
}

}  // namespace kvscope
