#include "engine/kv_layout.hpp"

#include <charconv>
#include <stdexcept>

namespace kvscope {

std::string to_string(KvLayout layout) {
  return layout.paged() ? "paged:" + std::to_string(layout.page_tokens) : "contiguous";
}

KvLayout parse_kv_layout(std::string_view name) {
  if (name == "contiguous") return {};
  constexpr std::string_view prefix = "paged:";
  if (name.substr(0, prefix.size()) == prefix) {
    const std::string_view digits = name.substr(prefix.size());
    std::size_t n = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (!digits.empty() && error == std::errc() && end == digits.data() + digits.size() && n >= 1 &&
        n <= kMaxPageTokens) {
      return {n};
    }
  }
  throw std::invalid_argument("unknown KV layout '" + std::string(name) +
                              "': expected contiguous or paged:N with N tokens per page, 1 to " +
                              std::to_string(kMaxPageTokens));
}

}  // namespace kvscope
