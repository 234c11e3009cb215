#include "tools/cli_limits.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace kvscope::cli {
namespace {

// The message after "FLAG: " (CLI11 adds that prefix to a transform's message), or "" when
// `text` is an integer in range; `value` receives it.
std::string integer_problem(std::string_view text, std::int64_t lo, std::int64_t hi,
                            std::string_view hi_why, std::int64_t& value) {
  const std::string typed(text);
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  const bool all_digits = !digits.empty() && end == digits.data() + digits.size();
  if (error == std::errc::result_out_of_range && all_digits) {
    const bool negative = digits.front() == '-';
    return negative
               ? "must be at least " + std::to_string(lo) + ", got " + typed
               : "must be at most " + std::to_string(hi) +
                     (hi_why.empty() ? "" : " (" + std::string(hi_why) + ")") + ", got " + typed;
  }
  if (error != std::errc() || !all_digits) return "'" + typed + "' is not an integer";
  if (value < lo) return "must be at least " + std::to_string(lo) + ", got " + typed;
  if (value > hi) {
    return "must be at most " + std::to_string(hi) +
           (hi_why.empty() ? "" : " (" + std::string(hi_why) + ")") + ", got " + typed;
  }
  return "";
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

std::string hardware_threads_why() {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  return "4 × the " + std::to_string(hw) + " hardware thread" + (hw == 1 ? "" : "s");
}

}  // namespace

int max_threads() {
  return 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::int64_t parse_integer(std::string_view flag, std::string_view text, std::int64_t lo,
                           std::int64_t hi, std::string_view hi_why) {
  std::int64_t value = 0;
  const std::string problem = integer_problem(text, lo, hi, hi_why, value);
  if (!problem.empty()) throw std::invalid_argument(std::string(flag) + ": " + problem);
  return value;
}

CLI::Validator integer_in(std::int64_t lo, std::int64_t hi, std::string hi_why) {
  return CLI::Validator(
      [lo, hi, hi_why](std::string& text) {
        std::int64_t value = 0;
        std::string problem = integer_problem(text, lo, hi, hi_why, value);
        if (problem.empty()) text = std::to_string(value);
        return problem;
      },
      "INT in [" + std::to_string(lo) + ", " + (hi == kNoLimit ? "…" : std::to_string(hi)) + "]");
}

CLI::Validator real_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() ||
            std::isspace(static_cast<unsigned char>(text.front()))) {
          return "'" + text + "' is not a number";
        }
        if (!std::isfinite(value)) return "must be a finite number, got " + text;
        if (value < lo) return "must be at least " + number(lo) + ", got " + text;
        if (value > hi) return "must be at most " + number(hi) + ", got " + text;
        return "";
      },
      "NUMBER");
}

CLI::Validator thread_count() { return integer_in(1, max_threads(), hardware_threads_why()); }

}  // namespace kvscope::cli
