#pragma once
// Intel AMX tiles (AMX-BF16, AMX-INT8): eight tile registers of up to 16 rows × 64 bytes,
// and a dot-product instruction per tile triple, C[16 × 16] += A[16 × K] · B[K × 16] (K = 32
// bf16 or 64 int8; B in "VNNI" order: each 64-byte row holds the 2 or 4 consecutive K
// elements of every column). The configuration, the instructions as templates on the tile
// number, and the peak probes. Include only from kernels/arch/avx512_amx.cpp.
//
// Why not the <immintrin.h> macros: GCC 12's _tile_loadd and _tile_dp* are asm statements
// with no memory operand or clobber, so the compiler may move stores to a buffer past the
// tile load that reads it; and they take the tile number as a literal token, not a constant.
#include <cstddef>
#include <cstdint>
#include <utility>

namespace kvscope::simd {

// The 64-byte operand of ldtilecfg, palette 1: rows and bytes per row of tiles 0..7.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};

  void set(int tile, std::size_t n_rows, std::size_t bytes_per_row) {
    rows[tile] = static_cast<std::uint8_t>(n_rows);
    colsb[tile] = static_cast<std::uint16_t>(bytes_per_row);
  }
};

// The configuration is loaded for a scope and the tile state released after it: a thread
// that leaves tile data configured has 8 KiB more state saved on every context switch.
class TileScope {
 public:
  explicit TileScope(const TileConfig& config) { asm volatile("ldtilecfg %0" ::"m"(config)); }
  ~TileScope() { asm volatile("tilerelease" ::: "memory"); }
  TileScope(const TileScope&) = delete;
  TileScope& operator=(const TileScope&) = delete;
};

template <int T>
inline void tile_zero() {
  asm volatile("tilezero %%tmm%c0" ::"n"(T));
}
// Tile T ← its configured rows, row r at base + r · stride bytes.
template <int T>
inline void tile_load(const void* base, std::size_t stride) {
  asm volatile("tileloadd (%0,%1,1), %%tmm%c2" ::"r"(base), "r"(stride), "n"(T) : "memory");
}
template <int T>
inline void tile_store(void* base, std::size_t stride) {
  asm volatile("tilestored %%tmm%c2, (%0,%1,1)" ::"r"(base), "r"(stride), "n"(T) : "memory");
}
// C += A · B: f32 sums of bf16 pairs.
template <int C, int A, int B>
inline void tile_dp_bf16() {
  asm volatile("tdpbf16ps %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"n"(C), "n"(A), "n"(B));
}
// C += A · B: int32 sums of groups of 4, A and B signed (keys × queries).
template <int C, int A, int B>
inline void tile_dp_s8s8() {
  asm volatile("tdpbssd %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"n"(C), "n"(A), "n"(B));
}
// C += A · B: int32 sums of groups of 4, A unsigned (weights), B signed (values).
template <int C, int A, int B>
inline void tile_dp_u8s8() {
  asm volatile("tdpbusd %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"n"(C), "n"(A), "n"(B));
}

// f(std::integral_constant<int, c>) for c = 0 … N − 1: tile numbers must be constants.
template <int N, class F>
inline void for_tiles(F&& f) {
  [&]<int... C>(std::integer_sequence<int, C...>) { (f(std::integral_constant<int, C>{}), ...); }
  (std::make_integer_sequence<int, N>{});
}

// Independent dot products into 4 accumulator tiles on each of `threads` threads; returns the
// operations done, 2 per multiply-add (16 × 16 × 32 bf16 or 16 × 16 × 64 int8 per product).
template <class A, bool Int8>
double amx_burn_arch(std::size_t iterations, int threads) {
  double ops = 0.0;
#pragma omp parallel num_threads(threads) reduction(+ : ops)
  {
    TileConfig config;
    for (int t = 0; t < 6; ++t) config.set(t, 16, 64);
    alignas(64) std::uint8_t zeros[16 * 64] = {};
    TileScope scope(config);
    tile_load<4>(zeros, 64);
    tile_load<5>(zeros, 64);
    for_tiles<4>([](auto c) { tile_zero<c>(); });
    for (std::size_t i = 0; i < iterations; ++i) {
      for_tiles<4>([](auto c) {
        if constexpr (Int8) {
          tile_dp_s8s8<c, 4, 5>();
        } else {
          tile_dp_bf16<c, 4, 5>();
        }
      });
    }
    ops += 2.0 * 16 * 16 * (Int8 ? 64 : 32) * 4 * static_cast<double>(iterations);
  }
  return ops;
}

// amx_burn_arch's bf16 products fed as a GEMM's inner loop feeds them, on the calling thread:
// each round loads the four operand tiles of a 2 × 2 block (1 KiB each, from a 4 KiB buffer
// that stays in L1) and, with `products`, multiplies them into the four accumulators, each
// operand tile read by two products. Returns the tile loads done (4 a round).
template <class A>
double amx_fed_burn_arch(std::size_t iterations, bool products) {
  TileConfig config;
  for (int t = 0; t < 8; ++t) config.set(t, 16, 64);
  alignas(64) std::uint8_t operands[4][16 * 64] = {};
  TileScope scope(config);
  for_tiles<4>([](auto c) { tile_zero<c>(); });
  for (std::size_t i = 0; i < iterations; ++i) {
    tile_load<4>(operands[0], 64);
    tile_load<5>(operands[1], 64);
    if (products) tile_dp_bf16<0, 4, 5>();
    tile_load<7>(operands[3], 64);
    if (products) tile_dp_bf16<1, 4, 7>();
    tile_load<6>(operands[2], 64);
    if (products) tile_dp_bf16<2, 6, 5>(), tile_dp_bf16<3, 6, 7>();
  }
  return 4.0 * static_cast<double>(iterations);
}

}  // namespace kvscope::simd
