#pragma once
// Feeds a layer a sequence the way a model does: rows [0, prefill) in one prefill, each
// remaining row in one decode step. Returns the outputs of all n rows in order.
#include <cstddef>
#include <vector>

#include "engine/decoder_layer.hpp"

namespace kvscope::test {

inline std::vector<float> run_split(DecoderLayer& layer, const std::vector<float>& x, std::size_t n,
                                    std::size_t prefill) {
  const std::size_t h = layer.config().hidden_size();
  std::vector<float> out;
  if (prefill > 0) out = layer.prefill(x.data(), prefill);
  for (std::size_t r = prefill; r < n; ++r) {
    const std::vector<float> y = layer.decode(x.data() + r * h);
    out.insert(out.end(), y.begin(), y.end());
  }
  return out;
}

}  // namespace kvscope::test
