#include "engine/measure/repetitions.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/measure/decode_timing.hpp"

namespace kvscope {

SampleStats summarize(const std::vector<double>& values) {
  if (values.empty()) throw std::invalid_argument("statistics of no values");
  SampleStats s;
  s.count = values.size();
  s.median = median(values);
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  s.min = *lo;
  s.max = *hi;
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(s.count);
  if (s.count > 1) {
    double squares = 0;
    for (double v : values) squares += (v - s.mean) * (v - s.mean);
    s.stdev = std::sqrt(squares / static_cast<double>(s.count - 1));
  }
  return s;
}

double spread(const std::vector<double>& values) {
  for (double v : values) {
    if (!(v > 0)) throw std::invalid_argument("spread of a value that is not positive");
  }
  if (values.size() < 2) return 1.0;
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return *hi / *lo;
}

int steps_per_repetition(int steps, int repetitions) {
  if (steps < 1)
    throw std::invalid_argument("steps must be at least 1, got " + std::to_string(steps));
  if (repetitions < 1) {
    throw std::invalid_argument("repetitions must be at least 1, got " +
                                std::to_string(repetitions));
  }
  return (steps + repetitions - 1) / repetitions;
}

}  // namespace kvscope
