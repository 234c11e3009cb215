#pragma once
// How a KV cache is laid out in memory: contiguous or paged.
#include <cstddef>
#include <string>
#include <string_view>

namespace kvscope {

// Contiguous (page_tokens 0): one block of `capacity` rows per kv head, allocated up front.
// Paged (page_tokens N): pages of N tokens of every kv head, taken from a shared pool as the
// sequence grows, found through a per-sequence page table (vLLM's PagedAttention).
struct KvLayout {
  std::size_t page_tokens = 0;

  bool paged() const { return page_tokens > 0; }
  bool operator==(const KvLayout&) const = default;
};

inline constexpr std::size_t kMaxPageTokens = 1 << 16;

// "contiguous" or "paged:16"
std::string to_string(KvLayout layout);

// Parses "contiguous" or "paged:N" (1 ≤ N ≤ kMaxPageTokens); throws std::invalid_argument
// naming the value and the choices.
KvLayout parse_kv_layout(std::string_view name);

}  // namespace kvscope
