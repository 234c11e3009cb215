#include "engine/rope_frequencies.hpp"

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

namespace kvscope {
namespace {

void require_positive(double value, const char* name) {
  if (!(value > 0.0) || !std::isfinite(value)) {
    throw std::invalid_argument(std::string("rope_scaling.") + name +
                                " must be a positive number, got " + std::to_string(value));
  }
}

// Llama 3.1's rule, one frequency at a time: keep the fast rotations, slow the slow ones by
// `factor`, and interpolate linearly in (context / wavelength) between the two bands.
double llama3_frequency(double inv_freq, const RopeScaling& s) {
  const double wavelength = 2.0 * std::numbers::pi / inv_freq;
  const double long_wavelength = s.original_max_positions / s.low_freq_factor;
  const double short_wavelength = s.original_max_positions / s.high_freq_factor;
  if (wavelength < short_wavelength) return inv_freq;
  if (wavelength > long_wavelength) return inv_freq / s.factor;
  const double smooth = (s.original_max_positions / wavelength - s.low_freq_factor) /
                        (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * inv_freq / s.factor + smooth * inv_freq;
}

}  // namespace

std::vector<double> rope_inv_frequencies(std::size_t head_dim, double theta,
                                         const RopeScaling& scaling) {
  if (scaling.kind == RopeScaling::Kind::yarn) {
    throw std::invalid_argument(
        "rope_scaling type \"yarn\" is not implemented (transformers' DeepSeek-V2 and "
        "DeepSeek's reference code disagree on its softmax scale mscale)");
  }
  if (scaling.kind == RopeScaling::Kind::llama3) {
    require_positive(scaling.factor, "factor");
    require_positive(scaling.low_freq_factor, "low_freq_factor");
    require_positive(scaling.high_freq_factor, "high_freq_factor");
    require_positive(scaling.original_max_positions, "original_max_position_embeddings");
    if (!(scaling.high_freq_factor > scaling.low_freq_factor)) {
      throw std::invalid_argument(
          "rope_scaling.high_freq_factor (" + std::to_string(scaling.high_freq_factor) +
          ") must exceed low_freq_factor (" + std::to_string(scaling.low_freq_factor) + ")");
    }
  }
  std::vector<double> inv_freq(head_dim / 2);
  for (std::size_t i = 0; i < inv_freq.size(); ++i) {
    inv_freq[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    if (scaling.kind == RopeScaling::Kind::llama3)
      inv_freq[i] = llama3_frequency(inv_freq[i], scaling);
  }
  return inv_freq;
}

}  // namespace kvscope
