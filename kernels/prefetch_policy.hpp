#pragma once
// How kernels that read the KV cache from memory request its rows ahead, chosen per CPU
// vendor from measurements on each: the same requests that raised the read rate on Intel Xeon
// lowered it on AMD Zen 4, whose hardware prefetchers stream such rows better alone. The
// choice moves no result beyond float32 rounding: prefetches change timing only, and where a
// policy reads in another order (decode over pages: attention_decode.hpp), only the keys at
// which the online softmax's partial results merge move.

#include <optional>

namespace kvscope {

// Whether kernels that stream cache rows in place for one query per kv head (MHA decode on
// fp32-fma) also request the rows ahead in software. Intel Xeon: yes (GroupPrefetcher,
// PageGroupPrefetcher). AMD: no. Zen 4 (2 threads, cold, 2026-12-04), MHA decode without them
// against with: f32 0.80-0.96x the time at 2,000 tokens and 0.81-0.84x at 32,768; bf16
// 0.84-0.90x and 0.65-0.70x.
bool prefetch_single_query_rows();

// Tests only: prefetch_single_query_rows() answers `requested` from now on (std::nullopt: the
// CPU's answer again), so that the decode paths of both vendors run on either CPU. Not for
// use while kernels run on other threads.
void override_prefetch_single_query_rows(std::optional<bool> requested);

// Whether PageRunPrefetcher requests its lines in 4 KiB runs side by side (line j of every
// run, then line j + 1: Intel Xeon, where a thread reading several pages at once read 1.4x
// faster than one stream) or front to back (AMD). Zen 4, front to back against runs: GQA-8
// decode at 2,000 tokens 0.89x the time (f32), 0.95x (bf16), 0.93x (int8, vnni-int8); at
// 32,768 tokens 0.90x (f32) and 0.86x (int8); MQA int8 0.83x.
bool prefetch_in_page_runs();

// Whether a key range read in blocks of under 32 KiB of rows requests its rows a group of
// about 32 KiB ahead (GroupPrefetcher) or a block ahead. Intel Xeon: groups (MHA int8 decode
// 0.79x the time at 32,768 tokens, bf16 0.86x). AMD: a block ahead. Zen 4 (2 threads, cold,
// 2026-12-05), VNNI decode a block ahead against groups: GQA-8 int8 0.91-0.95x the time at
// 2,000 tokens (0.93-0.94x warm), 0.95-1.01x at 32,768; GQA-4 0.90-0.97x and 0.96x.
bool prefetch_in_groups();

// Whether the next block of rows that several queries read together (GQA's query tiles on
// fp32-fma, the rows widened once into f32 tiles, the dot units' tile kernel) is requested into
// L1 (prefetcht0) rather than L2 (prefetcht1). AMD with an L1 data cache of 48 KiB or more
// (Zen 5): L1. Zen 5 (2 threads, cold, 2026-12-05), GQA-8 decode into L1 against L2: 0.92x
// the time (f32), 0.95x (bf16), 0.96x (int8, vnni-int8) at 2,000 tokens, 0.89x (f32) and 0.92x
// (bf16) at 32,768. (One query per head reading rows in place gained nothing: MHA int8 1.02x,
// over pages of 16 0.97-1.04x.) With 32 KiB (Zen 4) the next block (a 64-row f32 block's keys
// alone are 32 KiB) pushed out the rows being read: Zen 4 (2 threads, cold, 2026-12-07, the
// two binaries alternated), GQA-8 decode into L2 against L1: 0.78-0.92x the time (f32),
// 0.69-0.77x (f16), 0.79-0.84x (bf16), 0.78-0.87x (int8, vnni-int8) at 2,000 tokens; 0.81-0.86x,
// 0.69-0.75x, 0.81-0.87x and 0.74-0.81x at 32,768; GQA-4 f16 0.91-0.92x (2,000), bf16
// 0.84-0.87x (32,768, avx512-bf16); MHA int8 and 2,000-token prefill level. Intel Xeon: L2, as
// measured before this was asked (unmeasured there).
bool prefetch_shared_blocks_to_l1();

// Whether the GQA query-quad kernel (units/dot_query_quads.hpp), which requests each next
// block's rows a line per line of its score loop, also requests the keys of the block after
// that into L2, all at once, when the score loops are done
// (NextBlock::request_following_keys): its softmax and p·V then read no memory, and memory was
// idle there. AMD: yes. Zen 5 (2 threads, cold, 2026-12-06, keys and values against the next
// block alone, 6 pairs at 2,000 tokens and 4 at 32,768): GQA-8 int8 0.91-0.97x the time and
// 0.92-1.01x; GQA-4 int8 0.96-0.99x and 0.95-1.01x; GQA-4 bf16 0.97-1.01x and 0.99-1.00x.
// Keys only against keys and values (2026-12-07, steps of both alternated in one process, the
// median of 60-400 pairs, in each of 4-15 sittings): GQA-8 int8 0.96x at 2,000 tokens, 0.94-0.95x
// at 8,192, 0.92-0.94x at 12,000, 0.91-0.95x at 16,384, 0.92-0.97x at 32,768; GQA-4 int8
// 0.98x and 0.91-0.96x (2,000 and 32,768), GQA-4 bf16 0.98x and 0.98-1.00x. Nothing after
// next: 0.90-0.92x up to 8,192 tokens, 0.91-1.03x at 12,000-16,384, 1.00-1.07x at 32,768.
// Issued before the score loops it took 1.10-1.29x the time of the same request after them
// (GQA-8 int8); in other kernels it slowed them: GQA-8 on fp32-fma 1.01-1.32x, MQA on the dot
// units mostly 1.04-1.08x. Intel Xeon: no (unmeasured there).
bool prefetch_block_after_next();

// Whether the decode GEMV on 16-bit weights requests each stream's next row in software
// (kernels/weights/row_streams.hpp). Intel Xeon: yes (its hardware prefetcher stops at every
// 4 KiB page; requesting the next block of rows made the 4096 x 11008 bf16 GEMV 0.92x the time
// and the layer's bf16 decode step 0.93x, with blocks of adjacent rows; with streams,
// unmeasured there). AMD: no. Zen 5 (2 threads, 2026-12-06), bf16 GEMV in 8 streams, each
// stream requested ahead against none (2 alternations, 3 shapes): 0.88-1.03x the read rate
// 512 B ahead, 0.79-1.00x at 2 KiB, 0.75-0.87x at 8 KiB, 0.71-1.02x at 16 KiB.
bool prefetch_weight_rows();

}  // namespace kvscope
