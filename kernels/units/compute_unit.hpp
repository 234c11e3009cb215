#pragma once
// Which arithmetic unit an attention call runs on, and how that is chosen.
//
// exact: every cache element is widened to f32 and multiplied with f32 FMAs (the reference
//        arithmetic, error = the cache format's own rounding only).
// fast:  the CPU's dot-product and matrix units where they exist and measure faster: int8
//        caches on AMX-INT8 tiles or AVX-512 VNNI, int4 caches on VNNI (query and softmax
//        weights quantized to 8 bits per block), bf16 caches on AMX-BF16 tiles or AVX512-BF16
//        (query and weights rounded to bf16), f16 caches on AMX-BF16 as hi and lo bf16 parts
//        (amx_f16_split.hpp: three products each, error ~2^-16, f16's own unchanged) — each
//        within about 2× of its cache format's own error. Shapes and CPUs without such a unit
//        run exact.
#include <cstddef>
#include <string_view>

#include "kernels/isa.hpp"
#include "kernels/kv_dtype.hpp"

namespace kvscope {

enum class ComputeMode { exact, fast };
enum class ComputeUnit { fp32_fma, vnni_int8, avx512_bf16, amx_int8, amx_bf16 };

std::string_view to_string(ComputeMode mode);
std::string_view to_string(
    ComputeUnit unit);  // "fp32-fma", "vnni-int8", "avx512-bf16", "amx-int8", "amx-bf16"

// Parses "exact" or "fast"; throws std::invalid_argument naming the value.
ComputeMode parse_compute_mode(std::string_view name);

// AMX tiles (both types): from this many query vectors per key block; rows of whole 4-byte
// groups only (an int8 head_dim that is a multiple of 4, an even bf16 one). Measured on the
// Intel Xeon with AMX (2026-12-02, 2 threads, cold, d_head 128), decode step:
//   4 (GQA-8):  int8 VNNI 251 µs against AMX 281 µs at 2,000 tokens, 3.3 against 4.4 ms at
//               32,768; bf16 AMX 469 µs against 428 exact — the tiles do not pay;
//   8 (GQA-4):  AMX against exact: bf16 235 against 393 µs, int8 176 against 298 µs;
//   32 (MQA):   AMX against exact at 32,768 tokens: bf16 2.6×, int8 2.9×.
// f16 split on AMX-BF16 against exact (same CPU, 2,000 / 32,768 tokens): GQA-4 309 against
// 340 µs / 4.8 against 5.7 ms, GQA-2 158 against 238 µs / 2.4 ms, MQA 118 against 178 µs /
// 1.76 against 2.64 ms; causal prefill of 2,000 tokens 87 against 127 ms.
inline constexpr std::size_t kAmxMinSharing = 8;

// Query vectors from which the VNNI kernels transpose each int8 key block once for all of
// them (dot_tiles.hpp); below it each query reads the key rows in place (dot_key_rows.hpp).
// bf16 needs kBf16DotMinSharing for its unit to pay at all. The transposing kernel measured
// on AMD Zen 5 (Turin-like VM, d_head 128, 2 threads), decode step against the widening one:
//   1 query (MHA):  1.8× slower (32,768 tokens, warm); in place instead (Intel Xeon with AMX,
//                   2026-12-02, cold, median of 3): 9.2 against 12.5 ms at 32,768 tokens,
//                   630 against 780 µs at 2,000 — 92% and 82% of the read loop;
//   4 (GQA-8):      int8 1.4× faster warm at 2,000 tokens (106–127 against 145–147 µs) and
//                   1.04–1.16× cold at 2,000 and 32,768 (2026-12-01); bf16 0.8–1.0× — no gain;
//   8, 16 (GQA-4, GQA-2): 1.6–2.6× faster; 32 (MQA): int8 2.8×, bf16 2.1× faster.
// Since 8 queries read rows in place too (attention_decode.hpp), the exact kernel's time over
// the unit's, GQA-4 (Zen 5, 2 threads, cold, steps paired): bf16 1.03× at 2,000 tokens and
// 1.10× at 32,768, int8 1.59× and 1.67×; GQA-2 bf16 1.62× and 1.84×.
inline constexpr std::size_t kVnniMinSharing = 4;
// With 4 queries (GQA-8) the bf16 unit on query quads (dot_query_quads.hpp) measured 0.9x the
// widening kernel's time warm but level cold (Zen 5, 2,000 and 32,768 tokens): the rounding
// would buy nothing.
inline constexpr std::size_t kBf16DotMinSharing = 8;
// int4 caches take VNNI at any number of query vectors (dot_int4_keys.hpp): one query reads
// the rows itself, more share a block unpacked once. Against the tiled widening kernels on the
// Intel Xeon with AMX (2026-12-02, 2 threads, cold, d_head 128), 32,768 tokens: MHA 5.5
// against 7.9 ms, GQA-8 3.3–3.5 against 6.4–6.8, GQA-4 2.6–2.7 against 3.8, GQA-2 2.4
// against 3.1, MQA 2.3 against 2.8; causal prefill of 2,000 tokens 137–149 against 155–163 ms.

// The unit attend() uses for a cache of `types` and `head_dim` on `isa` in `mode` on this
// CPU, when `sharing` query vectors read each key block (decode: heads per kv head; prefill:
// that times the query rows). AMX first where the CPU has it, then the dot units. bf16 dot products
// are used only where a one-time probe measures them faster than f32 FMAs (on some Intel cores
// vdpbf16ps runs at half the FMA rate). Keys and values of different types run exact (fp32-fma):
// each unit serves one type. A paged cache (page_tokens > 0; 0: contiguous) takes the same
// unit: the dot units read it page by page as the fp32-fma kernels do (DotUnitKeys::run_paged;
// measured on the Intel Xeon with AMX, MHA int8 at 32,768 tokens over pages of 16: 11.0 ms on
// VNNI against 12.3 on fp32-fma, 9.0 contiguous), except int8 with one query per kv head over
// pages shorter than 64 tokens or of 256 and more on AMD, which widens as over a contiguous
// cache there.
ComputeUnit attention_compute_unit(KvTypes types, Isa isa, ComputeMode mode, std::size_t sharing,
                                   std::size_t head_dim, std::size_t page_tokens = 0);

// Runs `iterations` rounds of independent dot-product chains of `unit` on each of `threads`
// threads; returns the operations done, 2 per multiply-add (as fma_burn counts FLOPs).
// Throws std::invalid_argument if the CPU lacks the unit.
double dot_burn(ComputeUnit unit, std::size_t iterations, int threads);

// AMX-BF16 fed from L1, on the calling thread: `iterations` rounds of the four operand tile
// loads (1 KiB each) of a 2 × 2 block of tile products and, with `products`, those four
// products (each operand read twice, as in a GEMM's inner loop). Returns the tile loads done.
// Timed beside dot_burn(amx_bf16) it gives what the unit reaches when its operands come from
// memory, not registers (bench/amx_tile_bench). Throws std::invalid_argument without
// AMX-BF16.
double amx_bf16_fed_burn(std::size_t iterations, bool products);

// Whether this CPU has `unit` (fp32_fma: whenever AVX-512 or AVX2 is there).
bool cpu_has(ComputeUnit unit);

}  // namespace kvscope
