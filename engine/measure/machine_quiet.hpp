#pragma once
// Whether the machine was quiet enough during a measurement for its figures to be trusted.
// A sample of /proc before and after the run (load average, CPU time by state, this
// process's own CPU time) and the measurement's own drift between repetitions go into one
// pure judgement, judge_quiet(), so its thresholds can be tested on made-up numbers.
#include <cstdint>
#include <string>
#include <vector>

namespace kvscope {

// What the system says at one moment (Linux /proc; fields stay 0 where it is unreadable).
struct MachineSample {
  double load_1min = 0;           // /proc/loadavg, first field
  int cores = 0;                  // online CPUs
  bool has_cpu_times = false;     // whether /proc/stat's "cpu" line was read
  std::uint64_t busy_ticks = 0;   // user + nice + system + irq + softirq, all CPUs
  std::uint64_t steal_ticks = 0;  // time the hypervisor ran something else on our vCPUs
  std::uint64_t total_ticks = 0;  // every state
  double own_cpu_seconds = 0;     // this process, user + system, all threads
  double wall_seconds = 0;        // a steady clock
};

MachineSample sample_machine();

// What was seen over one run.
struct MachineObservations {
  double load_1min = 0;  // before the run
  int cores = 0;
  double others_busy_cores = 0;          // CPU time of everything but this process ÷ wall time
  double steal_fraction = 0;             // steal ÷ all CPU time over the run
  std::vector<double> step_spreads;      // per row: slowest ÷ fastest repetition's median step
  std::vector<double> bandwidth_drifts;  // per row: highest ÷ lowest repetition's read loop
  std::vector<double> peak_drifts;       // per row: highest ÷ lowest repetition's FMA peak
  // Per repetition: the FMA peak on `threads` threads ÷ on one thread (empty for one thread).
  // A hypervisor may run two vCPUs on one physical core's two hardware threads: they then
  // share its FMA (and AMX) units, and two threads compute no faster than one.
  int threads = 1;
  std::vector<double> thread_scalings;
};

// The load, the cores, the others' CPU time and the steal between two samples (the spreads
// and drifts are left for the caller to fill).
MachineObservations observe(const MachineSample& before, const MachineSample& after);

// The limits judge_quiet() applies; README.md ("Is the machine quiet?") says why each.
struct QuietThresholds {
  double load_per_core = 1.0;          // load average above cores × this
  double others_busy_per_core = 0.25;  // others kept more than this share of the cores busy
  double steal_fraction = 0.05;        // more than 5% of CPU time stolen
  double step_spread = 1.5;            // median row's repetitions more than 1.5× apart
  double bandwidth_drift = 1.5;        // median row's read loop more than 1.5× apart
  double peak_drift = 1.5;             // median row's FMA peak probes more than 1.5× apart
  double thread_scaling = 0.7;         // N threads' FMA peak under 0.7 × N × one thread's
};

struct QuietVerdict {
  bool unstable = false;
  std::string reason;  // what was seen, e.g. "load 3.9 on 2 cores; step times spread 1.8×"
};

// Unstable when any observation passes its threshold; the reason names each one that did.
// Spreads and drifts are judged by their median over rows, so one noisy row does not
// condemn a run while a busy machine, which slows every row, does.
QuietVerdict judge_quiet(const MachineObservations& seen, const QuietThresholds& limits = {});

// "warning: measurements unstable: <reason>" (empty for a quiet verdict).
std::string warning_line(const QuietVerdict& verdict);

}  // namespace kvscope
