#pragma once
// A prefill's projection on AMX-BF16 tiles: many rows of x (more than one B tile's 16) times
// bf16 weights, cache-blocked in Goto's manner over tiles. oneDNN 2.6's AMX matmul reaches
// 17–20% of the AMX-BF16 peak on these shapes here; this kernel's layout keeps every tile
// load in L2 and writes y in place:
//   - x is rounded to bf16 once, in A-tile order: each A tile (16 rows × 32 elements) one
//     contiguous KiB, and the next pair of x rows' tiles requested into L2 while the
//     current pair meets the block's W rows (−15–20% time at 2,000 × 4,096 × 4,096).
//   - W, per thread, a block of kAmxBlockRows rows × up to kAmxBlockSteps · 32 columns at a
//     time, is packed into B-tile order (each 16 × 16 block of bf16 pairs transposed) and
//     stays in L2 (1 MiB) while every row pair of x streams past it.
//   - C tiles (x rows × W rows) are y's own rows: stored once per block of K and reloaded
//     for the next; a last pair of x rows short of 32 accumulates in a scratch instead.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/weights/weight_dtype.hpp"

namespace kvscope {

inline constexpr std::size_t kAmxBlockRows = 256;  // W rows packed per block
inline constexpr std::size_t kAmxBlockSteps = 64;  // 32-column steps of K per block

// The 64-byte aligned buffers the kernel reuses between calls (a prefill calls it seven
// times a layer): x in bf16, and each thread's packed block of W and short last row pair.
// Aligned because every tile row is a 64-byte line: a row across two lines is two reads.
// Defined in an unflagged unit, not beside the kernel: no allocation code compiled for AMX
// CPUs may be shared with the rest of the program.
class AmxGemmScratch {
 public:
  AmxGemmScratch();
  ~AmxGemmScratch();
  AmxGemmScratch(const AmxGemmScratch&) = delete;
  AmxGemmScratch& operator=(const AmxGemmScratch&) = delete;

  // Room for m rows of x (padded to whole pairs of 32 rows) against w on `threads` threads;
  // grows, never shrinks. Throws std::bad_alloc.
  void reserve(std::size_t m, const WeightsView& w, int threads);
  std::uint16_t* x() const;
  std::uint32_t* packed(int thread) const;  // kAmxBlockRows × kAmxBlockSteps B tiles
  float* tail(int thread) const;            // 32 rows × w.rows

 private:
  struct Buffer;
  Buffer* x_;
  std::vector<Buffer*> packed_, tail_;
};

// Whether gemm_bf16_amx_blocked takes this product: bf16 weights, more than 16 rows of x,
// W's rows in whole pairs of 16 and its columns in whole 32-element steps (every
// Llama-family width is).
bool gemm_bf16_amx_blocked_fits(std::size_t m, const WeightsView& w);

// y[m × w.rows] = bf16(x[m × w.cols]) · Wᵀ, W bf16 row-major read from its mapping (packed a
// block at a time, never whole), x rounded to bf16 to nearest even (as gemm_bf16_amx rounds
// it); products exact, summed in f32 by tdpbf16ps. W's rows split over `threads` OpenMP
// threads in pairs of 16. Call only where cpu_has(ComputeUnit::amx_bf16) (Linux granted tile
// data) and gemm_bf16_amx_blocked_fits(); throws std::invalid_argument otherwise.
void gemm_bf16_amx_blocked(const float* x, std::size_t m, const WeightsView& w, float* y,
                           int threads, AmxGemmScratch& scratch);

}  // namespace kvscope
