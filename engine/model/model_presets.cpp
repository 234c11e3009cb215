#include "engine/model/model_presets.hpp"

#include <array>
#include <stdexcept>
#include <string>

namespace kvscope {

std::span<const ModelPreset> model_presets() {
  static constexpr std::array<ModelPreset, 10> kPresets{{
      {"llama-2-7b", 32, 32, 128, 32, 4096, 11008},
      {"llama-3-8b", 32, 8, 128, 32, 4096, 14336},
      {"llama-3.1-8b", 32, 8, 128, 32, 4096, 14336},
      {"mistral-7b", 32, 8, 128, 32, 4096, 14336},
      {"mistral-7b-v0.1", 32, 8, 128, 32, 4096, 14336, 4096},
      {"qwen2.5-7b", 28, 4, 128, 28, 3584, 18944},
      {"qwen3-8b", 32, 8, 128, 36, 4096, 12288},
      {"tinyllama-1.1b", 32, 4, 64, 22, 2048, 5632},
      {"falcon-7b", 71, 1, 64, 32, 4544, 18176},
      // DeepSeek-V2-Lite: 16 heads of nope 128 + rope 64; latent 512, rope 64; layer 0's
      // dense MLP is 10944 wide.
      {"deepseek-v2-lite", 16, 16, 192, 27, 2048, 10944, 0, 512, 64, 128, 0},
  }};
  return kPresets;
}

const ModelPreset& find_model_preset(std::string_view name) {
  std::string known;
  for (const ModelPreset& p : model_presets()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  throw std::invalid_argument("unknown model preset '" + std::string(name) + "' (known: " + known +
                              ")");
}

}  // namespace kvscope
