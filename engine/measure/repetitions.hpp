#pragma once
// Repeated measurements: the statistics a report row shows over its timed steps, how far its
// repetitions drift apart, and how a budget of timed steps is shared among repetitions.
#include <cstddef>
#include <vector>

namespace kvscope {

// Median, mean, sample standard deviation (n − 1; 0 for one value), min and max of a sample.
struct SampleStats {
  std::size_t count = 0;
  double median = 0, mean = 0, stdev = 0, min = 0, max = 0;
};

// Throws std::invalid_argument for an empty sample.
SampleStats summarize(const std::vector<double>& values);

// The slowest over the fastest of positive values (1 for fewer than two): how far apart
// repetitions of one measurement landed. Throws std::invalid_argument for a value ≤ 0.
double spread(const std::vector<double>& values);

// Timed steps per repetition when `repetitions` share a budget of `steps`: ⌈steps ÷
// repetitions⌉, so the total is never below the budget (10 steps in 3 repetitions: 4 each).
// Throws std::invalid_argument when either is below 1.
int steps_per_repetition(int steps, int repetitions);

}  // namespace kvscope
