#pragma once
// RoPE inverse frequencies per rotated pair, as Hugging Face transformers computes them for
// the rope types kvscope implements.
#include <cstddef>
#include <vector>

namespace kvscope {

// config.json's "rope_scaling". kind none: plain RoPE. kind llama3 (Llama 3.1/3.2/3.3):
// wavelengths longer than original_max_positions / low_freq_factor are slowed by `factor`,
// shorter than original_max_positions / high_freq_factor kept, and those between blended
// smoothly (transformers' _compute_llama3_parameters).
// kind yarn (DeepSeek-V2's released configs) is parsed so `kvscope size --config` reads
// those configs, but not computed: rope_inv_frequencies refuses it (transformers' DeepSeek-V2
// and DeepSeek's own code disagree on its softmax mscale, so there is no one answer to match).
struct RopeScaling {
  enum class Kind { none, llama3, yarn };
  Kind kind = Kind::none;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_positions = 8192.0;
};

// head_dim / 2 inverse frequencies: pair i (elements i and i + head_dim/2) turns by
// pos · inv_freq[i] radians. Plain: theta^(−2i/head_dim). Throws std::invalid_argument for
// llama3 parameters that are not positive or with high_freq_factor ≤ low_freq_factor, and
// for yarn, naming it (not implemented).
std::vector<double> rope_inv_frequencies(std::size_t head_dim, double theta,
                                         const RopeScaling& scaling);

}  // namespace kvscope
