#pragma once
// Times the absorbed MLA decode step's attention over a filled latent cache (DeepSeek-V2):
// the measurement behind the report's MLA rows.
#include <cstdint>

#include "engine/measure/decode_timing.hpp"

namespace kvscope {

// As time_attention_decode, for multi-head latent attention: `request.n_heads` heads share
// one latent cache of `tokens` rows of kv_lora_rank + qk_rope_head_dim f32 values (random,
// seeded); one step runs MlaAttention::attend_latent (every head's absorbed query against
// every cached row, softmax, the weighted sum of the latents) over `layers` caches in order.
// The per-head folds W_UK and W_UV are projections of the query and the output, not reads
// of the cache, and are not timed here (the full layer's step times them). n_kv_heads,
// head_dim and kv_dtype of the request are not used: the cache is f32. Cold and warm as in
// time_attention_decode (copies cycled, or flushed after each step). Throws as it does.
DecodeTiming time_mla_attention_decode(const DecodeTimingRequest& request,
                                       std::int64_t kv_lora_rank, std::int64_t qk_rope_head_dim);

}  // namespace kvscope
