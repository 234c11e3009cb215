#include "kernels/attention.hpp"

#include "kernels/ref/attention_ref.hpp"

namespace kvscope {

void attend(const AttentionProblem& problem, Isa isa, int threads) {
  (void)isa;  // The SIMD kernels arrive with the kernels issue; scalar serves every ISA until then.
  attend_ref(problem, threads);
}

}  // namespace kvscope
