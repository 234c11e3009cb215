// Every numeric flag of every subcommand, given 0, a negative, a huge, a non-numeric or an
// empty value (NaN and infinity for --duration): a non-zero exit, never a signal, and one
// line that names the flag and echoes the value as it was typed.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "support/kvscope_command.hpp"
#include "tools/cli_limits.hpp"

namespace {

using kvscope::test::CommandResult;
using kvscope::test::kvscope;

struct Flag {
  std::string command;  // the subcommand and what else it needs
  std::string flag;
  std::vector<std::string> bad;  // values to refuse
};

const std::vector<std::string> kCounts = {"0",   "-3",  "99999999999999999999", "abc", "''",
                                          "1.5", "0x10"};

std::vector<Flag> flags() {
  std::vector<Flag> all;
  for (const char* command : {"size", "decode", "report --no-layer"}) {
    for (const char* flag : {"--heads", "--d-head", "--layers"})
      all.push_back({command, flag, kCounts});
  }
  for (const char* command : {"size", "decode"}) {
    for (const char* flag : {"--tokens", "--kv-heads"}) all.push_back({command, flag, kCounts});
  }
  all.push_back({"size", "--batch", kCounts});
  for (const char* command : {"decode", "report --no-layer"}) {
    all.push_back({command, "--threads", {"0", "-1", "100000", "99999999999999999999", "x", "''"}});
    all.push_back({command, "--steps", {"0", "-5", "1000001", "2147483648", "ten", "''"}});
    all.push_back({command, "--repetitions", {"0", "-2", "101", "99999999999999999999", "''"}});
  }
  all.push_back(
      {"decode", "--duration", {"-1", "nan", "inf", "-inf", "1e999", "86401", "soon", "''"}});
  for (const char* list : {"--tokens", "--kv-heads"}) {
    all.push_back({"report --no-layer",
                   list,
                   {"0", "512,-1", "2000,99999999999999999999", "512,abc", "''", ","}});
  }
  all.push_back({"trace", "--d-head", {"0", "-1", "99999999999999999999", "four", "''"}});
  all.push_back({"trace", "--position", {"-1", "99999999999999999999", "last", "''"}});
  const std::string run = "run --model m --input x.npy --output y.npy --layer 0";
  all.push_back({run, "--prefill", {"-1", "99999999999999999999", "all", "''"}});
  all.push_back({run, "--threads", {"0", "100000", "99999999999999999999", "''"}});
  all.push_back({"run --model m --input x.npy --output y.npy",
                 "--layer",
                 {"-1", "99999999999999999999", "first", "''"}});
  return all;
}

TEST(FlagLimits, EveryBadNumberIsOneLineNamingTheFlagAndTheValue) {
  int checked = 0;
  for (const Flag& f : flags()) {
    for (const std::string& value : f.bad) {
      const std::string args = f.command + " " + f.flag + " " + value;
      const CommandResult r = kvscope(args);
      const std::string typed = value == "''" ? "" : value;
      EXPECT_GT(r.status, 0) << args << " → status " << r.status << " (−1: a signal)\n" << r.out;
      EXPECT_NE(r.out.find(f.flag), std::string::npos) << args << " → " << r.out;
      if (!typed.empty() && typed != ",") {
        EXPECT_NE(r.out.find(typed), std::string::npos) << args << " → " << r.out;
      }
      EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << args << " printed more than one line:\n"
                                                    << r.out;
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(FlagLimits, ThreadsBeyondTheDocumentedMaximumAreRefusedNotCrashed) {
  const int max = kvscope::cli::max_threads();
  const CommandResult r =
      kvscope("decode --tokens 10 --steps 1 --threads " + std::to_string(max + 1));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--threads: must be at most " + std::to_string(max) + " (4 × the "),
            std::string::npos)
      << r.out;
  const CommandResult at_max = kvscope(
      "decode --heads 4 --d-head 16 --tokens 10 --steps 1 "
      "--cache-state warm --threads " +
      std::to_string(max));
  EXPECT_EQ(at_max.status, 0) << at_max.out;
}

TEST(FlagLimits, ParseIntegerEchoesTheTextAndRefusesOtherBases) {
  using kvscope::cli::parse_integer;
  EXPECT_EQ(parse_integer("--tokens", "2000", 1, 10'000), 2000);
  EXPECT_EQ(parse_integer("--tokens", "+7", 1, 10), 7);
  EXPECT_EQ(parse_integer("--tokens", "010", 1, 100), 10);  // decimal, not octal
  const auto message = [](std::string_view text, std::int64_t lo, std::int64_t hi) {
    try {
      parse_integer("--x", text, lo, hi);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message("99999999999999999999", 1, kvscope::cli::kNoLimit),
            "--x: must be at most 9223372036854775807, got 99999999999999999999");
  EXPECT_EQ(message("-99999999999999999999", 1, 5),
            "--x: must be at least 1, got -99999999999999999999");
  EXPECT_EQ(message("0", 1, 5), "--x: must be at least 1, got 0");
  EXPECT_EQ(message("6", 1, 5), "--x: must be at most 5, got 6");
  for (const char* bad : {"", " 5", "5 ", "0x10", "1e3", "5k", "+", "-", "++5"}) {
    EXPECT_EQ(message(bad, 1, 5), "--x: '" + std::string(bad) + "' is not an integer") << bad;
  }
}

}  // namespace
