#pragma once
// The limits of the numeric flags, checked while the command line is parsed: a bad value is
// one line that names the flag and echoes the value as typed, never a wrapped-around number
// or a crash further in.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace kvscope::cli {

inline constexpr std::int64_t kNoLimit = std::numeric_limits<std::int64_t>::max();
inline constexpr int kMaxSteps = 1'000'000;           // --steps: a million decode steps
inline constexpr int kMaxRepetitions = 100;           // --repetitions
inline constexpr std::int64_t kMaxBatch = 4096;       // --batch: sequences decoded together
inline constexpr double kMaxDurationSeconds = 86400;  // --duration: a day

// The most threads --threads accepts: 4 × the hardware threads. More only measures the
// scheduler, and OpenMP cannot start 100,000 threads (kvscope crashed trying).
int max_threads();

// `text` as a base-10 integer (an optional '+', no spaces, no hex or octal) in [lo, hi].
// Throws std::invalid_argument: "FLAG: must be at least LO, got TEXT", "... at most HI ...",
// or "FLAG: 'TEXT' is not an integer". `hi_why` (e.g. "4 × the 2 hardware threads") follows HI.
std::int64_t parse_integer(std::string_view flag, std::string_view text, std::int64_t lo,
                           std::int64_t hi, std::string_view hi_why = {});

// CLI11 transforms (add with ->transform(...)): refuse anything outside [lo, hi] with the
// messages above (CLI11 puts the flag's name in front) and pass the number on in canonical
// decimal, so that CLI11, which reads "010" as octal, sees "10".
CLI::Validator integer_in(std::int64_t lo, std::int64_t hi = kNoLimit, std::string hi_why = {});
// A finite number in [lo, hi] ("nan", "inf" and "1e999" refused).
CLI::Validator real_in(double lo, double hi);
// 1 … max_threads().
CLI::Validator thread_count();

}  // namespace kvscope::cli
