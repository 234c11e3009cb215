// The busy-machine verdict on made-up observations: quiet numbers pass, each kind of busy
// number is named, whatever the machine running the test is doing.
#include "engine/measure/machine_quiet.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

namespace kvscope {
namespace {

// A quiet 2-core machine as measured here: load 0.3, a few hundredths of a core used by
// others, no steal, repetitions within 10% of each other.
MachineObservations quiet() {
  return {.load_1min = 0.3,
          .cores = 2,
          .others_busy_cores = 0.04,
          .steal_fraction = 0.0,
          .step_spreads = {1.05, 1.1, 1.02, 1.2},
          .bandwidth_drifts = {1.03, 1.08, 1.1, 1.01},
          .peak_drifts = {1.02, 1.1, 1.04, 1.0},
          .threads = 2,
          .thread_scalings = {1.95, 1.9, 2.0}};
}

TEST(MachineQuiet, QuietNumbersGiveNoWarning) {
  const QuietVerdict v = judge_quiet(quiet());
  EXPECT_FALSE(v.unstable);
  EXPECT_EQ(v.reason, "");
  EXPECT_EQ(warning_line(v), "");
  MachineObservations nothing;  // nothing measured: no evidence of a busy machine
  EXPECT_FALSE(judge_quiet(nothing).unstable);
}

TEST(MachineQuiet, BusyNumbersNameWhatWasSeen) {
  MachineObservations busy = quiet();
  busy.load_1min = 3.9;
  busy.step_spreads = {1.8, 1.9, 1.7};
  const QuietVerdict v = judge_quiet(busy);
  EXPECT_TRUE(v.unstable);
  EXPECT_EQ(v.reason, "load 3.9 on 2 cores; step times spread 1.8×");
  EXPECT_EQ(warning_line(v),
            "warning: measurements unstable: load 3.9 on 2 cores; step times spread 1.8×");
}

TEST(MachineQuiet, EachThresholdAloneMakesARunUnstable) {
  MachineObservations o = quiet();
  o.others_busy_cores = 1.2;
  EXPECT_EQ(judge_quiet(o).reason, "other programs kept 1.2 of 2 cores busy");
  o = quiet();
  o.steal_fraction = 0.08;
  EXPECT_EQ(judge_quiet(o).reason, "8% of CPU time stolen by the hypervisor");
  o = quiet();
  o.bandwidth_drifts = {2.1, 2.0, 1.2};
  EXPECT_EQ(judge_quiet(o).reason, "read bandwidth drifted 2.0× between repetitions");
  o = quiet();
  o.peak_drifts = {2.1, 1.7, 1.2};
  EXPECT_EQ(judge_quiet(o).reason, "FMA peak drifted 1.7× between repetitions");
  o = quiet();
  o.thread_scalings = {1.02, 0.98, 1.9};  // two vCPUs on one core's two hardware threads
  EXPECT_EQ(judge_quiet(o).reason,
            "2 threads reached 1.0× one thread's FMA peak (vCPUs sharing a physical core, or "
            "others running on them)");
  o.threads = 8;  // as many threads as cores are judged, not more: 2 here
  EXPECT_TRUE(judge_quiet(o).unstable);
  o.threads = 1;  // nothing to scale
  EXPECT_FALSE(judge_quiet(o).unstable);
  // Just under each limit: quiet.
  o = quiet();
  o.load_1min = 2.0;
  o.others_busy_cores = 0.5;
  o.steal_fraction = 0.05;
  o.step_spreads = {1.5};
  o.bandwidth_drifts = {1.5};
  o.peak_drifts = {1.5};
  o.thread_scalings = {1.4};
  EXPECT_FALSE(judge_quiet(o).unstable) << judge_quiet(o).reason;
}

TEST(MachineQuiet, OneNoisyRowDoesNotCondemnTheRun) {
  MachineObservations o = quiet();
  o.step_spreads = {1.05, 4.0, 1.1};  // the median row is steady
  EXPECT_FALSE(judge_quiet(o).unstable);
  o.step_spreads = {1.05, 4.0, 2.5};  // most rows moved: the machine did
  EXPECT_EQ(judge_quiet(o).reason, "step times spread 2.5×");
}

TEST(MachineQuiet, ObserveSubtractsThisProcessAndCountsSteal) {
  const auto hz = static_cast<std::uint64_t>(sysconf(_SC_CLK_TCK));  // ticks per second
  MachineSample before{.load_1min = 1.5,
                       .cores = 2,
                       .has_cpu_times = true,
                       .busy_ticks = 1000,
                       .steal_ticks = 10,
                       .total_ticks = 5000,
                       .own_cpu_seconds = 1.0,
                       .wall_seconds = 100};
  MachineSample after = before;
  after.wall_seconds = 110;      // 10 s
  after.busy_ticks += 15 * hz;   // 15 CPU-seconds busy in all
  after.own_cpu_seconds += 6;    // 6 of them ours: others kept 0.9 cores busy
  after.total_ticks += 20 * hz;  // 2 cores × 10 s
  after.steal_ticks += 2 * hz;   // 2 s stolen: 10%
  after.load_1min = 3.0;         // the load before the run is the one judged
  const MachineObservations o = observe(before, after);
  EXPECT_DOUBLE_EQ(o.load_1min, 1.5);
  EXPECT_EQ(o.cores, 2);
  EXPECT_NEAR(o.others_busy_cores, 0.9, 1e-9);
  EXPECT_NEAR(o.steal_fraction, 0.1, 1e-9);
  after.has_cpu_times = false;  // no /proc/stat: nothing claimed
  EXPECT_EQ(observe(before, after).others_busy_cores, 0);
}

TEST(MachineQuiet, SampleReadsThisMachine) {
  const MachineSample s = sample_machine();
  EXPECT_GE(s.cores, 1);
  EXPECT_GE(s.load_1min, 0);
  EXPECT_GT(s.own_cpu_seconds, 0);
}

}  // namespace
}  // namespace kvscope
