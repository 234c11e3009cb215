// `kvscope trace`: one attention row, every step printed with its name, shape and values.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/attention_trace.hpp"
#include "tools/cli_limits.hpp"
#include "tools/cli_support.hpp"
#include "tools/commands.hpp"

namespace kvscope::cli {
namespace {

struct TraceFlags {
  std::string query = "2,1";
  std::vector<std::string> keys{"1,1", "0,2"};
  std::vector<std::string> values{"1,0", "0,1"};
  std::int64_t d_head = 0;
  bool no_scale = false;
  std::int64_t position = 0;
  bool json = false;
};

std::vector<float> parse_vector(const std::string& text, const std::string& flag) {
  std::vector<float> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    float value = 0;
    try {
      value = std::stof(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    while (used < item.size() && item[used] == ' ') ++used;
    if (item.empty() || used != item.size()) {
      throw std::invalid_argument(flag + " '" + text + "': '" + item + "' is not a number");
    }
    out.push_back(value);
  }
  if (out.empty()) throw std::invalid_argument(flag + " is empty");
  return out;
}

std::string format_values(const std::vector<float>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    char text[32];
    if (std::isinf(v[i]))
      std::snprintf(text, sizeof text, "%s", v[i] < 0 ? "-inf" : "inf");
    else
      std::snprintf(text, sizeof text, "%.4g", v[i]);
    s += (i ? ", " : "") + std::string(text);
  }
  return s + "]";
}

nlohmann::json finite_or_null(const std::vector<float>& v) {
  nlohmann::json out = nlohmann::json::array();
  for (float x : v) out.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr));
  return out;
}

void print_trace(const TraceInput& in, const AttentionTrace& tr) {
  const std::size_t n = in.keys.size();
  const std::string row = "[1×" + std::to_string(n) + "]";
  std::printf("Attention trace: 1 query · %zu keys · d_head %zu · query at position %zu\n\n", n,
              tr.d_head, tr.position);
  std::printf("inputs   q %s;", format_values(in.query).c_str());
  for (std::size_t t = 0; t < n; ++t) {
    std::printf(" k%zu %s v%zu %s%s", t + 1, format_values(in.keys[t]).c_str(), t + 1,
                format_values(in.values[t]).c_str(), t + 1 < n ? ";" : "\n\n");
  }
  std::printf("step 1  raw scores    s = q·kᵀ                  %-8s %s\n", row.c_str(),
              format_values(tr.raw_scores).c_str());
  for (std::size_t t = 0; t < n && in.query.size() <= 8; ++t) {
    std::string terms;
    for (std::size_t j = 0; j < in.query.size(); ++j) {
      char text[48];
      std::snprintf(text, sizeof text, "%s%g×%g", j ? " + " : "", in.query[j], in.keys[t][j]);
      terms += text;
    }
    std::printf("          q·k%zu = %s = %g\n", t + 1, terms.c_str(), tr.raw_scores[t]);
  }
  if (in.scale) {
    std::printf("step 2  scaled        s ÷ √d_head = s ÷ %-6g %-8s %s\n", tr.scale_divisor,
                row.c_str(), format_values(tr.scaled_scores).c_str());
  } else {
    std::printf("step 2  scaled        skipped (--no-scale)      %-8s %s\n", row.c_str(),
                format_values(tr.scaled_scores).c_str());
  }
  std::printf("step 3  causal mask   keys after position %-4zu %-8s %s\n", tr.position, row.c_str(),
              format_values(tr.masked_scores).c_str());
  std::printf("step 4  softmax       e^(s − max) / Σ           %-8s %s  (sum %.6g)\n", row.c_str(),
              format_values(tr.weights).c_str(), tr.weight_sum);
  std::printf("step 5  output        O = Σ w_t · v_t           [1×%zu]    %s\n", tr.output.size(),
              format_values(tr.output).c_str());
  std::string blend;
  for (std::size_t t = 0; t < tr.visible_keys; ++t) {
    char text[64];
    std::snprintf(text, sizeof text, "%s%.4g×v%zu", t ? " + " : "", tr.weights[t], t + 1);
    blend += text;
  }
  std::printf("          O = %s\n\n%s\n", blend.c_str(), explain_trace(tr).c_str());
}

}  // namespace

void add_trace_command(CLI::App& app, OnParsed then) {
  auto flags = std::make_shared<TraceFlags>();
  CLI::App* cmd = app.add_subcommand(
      "trace", "print every step of one attention row (default: the lesson example)");
  cmd->add_option("--query", flags->query, "query vector, e.g. 2,1")->capture_default_str();
  cmd->add_option("--key", flags->keys, "a key vector (repeat once per key)")
      ->capture_default_str();
  cmd->add_option("--value", flags->values, "a value vector (repeat once per key)")
      ->capture_default_str();
  cmd->add_option("--d-head", flags->d_head,
                  "true head size for the √d_head scale (default: the vectors' length; 4 for "
                  "the lesson example)")
      ->transform(integer_in(1));
  cmd->add_flag("--no-scale", flags->no_scale, "skip the ÷√d_head step");
  cmd->add_option("--position", flags->position,
                  "0-based position of the query; later keys are masked (default: all visible)")
      ->transform(integer_in(0));
  cmd->add_flag("--json", flags->json, "print a JSON object");
  cmd->callback([flags, cmd, then] {
    const bool lesson = cmd->count("--query") + cmd->count("--key") + cmd->count("--value") == 0;
    if (!lesson &&
        (cmd->count("--query") == 0 || cmd->count("--key") == 0 || cmd->count("--value") == 0)) {
      throw std::invalid_argument(
          "a custom example needs --query, --key and --value together (one --value per --key)");
    }
    TraceInput in;
    in.query = parse_vector(flags->query, "--query");
    for (const auto& k : flags->keys) in.keys.push_back(parse_vector(k, "--key"));
    for (const auto& v : flags->values) in.values.push_back(parse_vector(v, "--value"));
    if (cmd->count("--d-head") > 0) {
      in.d_head = flags->d_head;
    } else if (lesson) {
      in.d_head = 4;  // the lesson's vectors are 2-element illustrations of d_head-4 vectors
    }
    if (cmd->count("--position") > 0) in.position = flags->position;
    in.scale = !flags->no_scale;
    const AttentionTrace tr = trace_attention(in);
    if (then == OnParsed::validate_only) return;
    if (!flags->json) {
      print_trace(in, tr);
      return;
    }
    const nlohmann::json out = {{"d_head", tr.d_head},
                                {"scale_divisor", tr.scale_divisor},
                                {"position", tr.position},
                                {"raw_scores", tr.raw_scores},
                                {"scaled_scores", tr.scaled_scores},
                                {"masked_scores", finite_or_null(tr.masked_scores)},
                                {"weights", tr.weights},
                                {"weight_sum", tr.weight_sum},
                                {"output", tr.output},
                                {"explanation", explain_trace(tr)}};
    std::cout << out.dump(2) << "\n";
  });
}

}  // namespace kvscope::cli
