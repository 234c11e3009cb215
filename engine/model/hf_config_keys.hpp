#pragma once
// Which config.json keys kvscope understands for each model family, so that a key it does
// not implement is refused rather than ignored (a silent wrong answer).
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace kvscope {

// The families `kvscope run` computes exactly: "llama", "mistral", "qwen2", "qwen3",
// "deepseek_v2" (its dense layers).
// Returns config.json's model_type after checking every top-level key: each must be one
// the parser reads, one known not to change a decoder layer's math (token ids, vocabulary
// and embedding tying, dtype notes, init and dropout settings), or one the family defines
// and the parser checks. Throws std::runtime_error starting with `label` and naming the
// key for anything else, and naming model_type when it is missing or not a supported family.
std::string check_config_keys(const nlohmann::json& config, std::string_view label);

}  // namespace kvscope
