#pragma once
// Scalar reference attention: plain loops, one query row and one head at a time.
#include "kernels/attention.hpp"

namespace kvscope {

// Same contract as attend(). Heads and queries are independent, so they are spread over
// `threads` OpenMP threads; each (query, head) is computed in the same order whatever the
// thread count, so the result does not depend on it.
void attend_ref(const AttentionProblem& problem, int threads);

}  // namespace kvscope
