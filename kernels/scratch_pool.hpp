#pragma once
// The kernels' scratch memory (Scratch in attention_block.hpp), kept per thread between calls.
#include <cstddef>

namespace kvscope::simd {

// 64-byte aligned memory of `bytes` (a multiple of 64): a block this thread gave back with
// the same size, else a new one. Aborts when none can be had (callers run inside OpenMP
// regions, which an exception may not leave).
void* take_scratch(std::size_t bytes);
// Keeps `block` (from take_scratch, of `bytes`) for this thread's next take_scratch, or frees
// it past the pool's limits.
void give_back_scratch(void* block, std::size_t bytes);
// Whether given-back blocks are kept (not under AddressSanitizer: there every block is fresh,
// so that a use after a scratch's scope still faults), and the bytes this thread now keeps.
bool scratch_pool_keeps();
std::size_t scratch_kept_bytes();

}  // namespace kvscope::simd
