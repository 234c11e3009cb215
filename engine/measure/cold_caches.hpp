#pragma once
// Cold and warm decode measurements. In a model's decode step, every other layer's cache
// and all the weights stream through between two reads of layer L's cache, so its bytes
// come from DRAM. A cold measurement reproduces that: it reads a model's L caches in order
// and, when they do not already stream past 4 × every last-level cache its threads reach,
// cycles through independent copies until they do (or, where memory does not allow copies,
// flushes the lines after each step). Warm re-reads the same L caches step after step.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/kv_cache.hpp"

namespace kvscope {

enum class CacheState { cold, warm };
enum class ColdMethod { automatic, copies, flush };

std::string_view to_string(CacheState state);
std::string_view to_string(ColdMethod method);
// Throw std::invalid_argument naming the value and the choices.
CacheState parse_cache_state(std::string_view name);
ColdMethod parse_cold_method(std::string_view name);

// How many caches a measurement allocates and how it keeps them cold.
struct CachePlan {
  CacheState state = CacheState::cold;
  ColdMethod method = ColdMethod::copies;  // copies or flush (warm: copies, one set)
  std::uint64_t cache_bytes = 0;           // one layer's cache
  std::size_t layers = 1;                  // caches one step reads, in order
  std::size_t caches = 1;                  // distinct caches allocated (≥ layers)
  std::uint64_t llc_bytes = 0;
  int llcs = 1;  // last-level caches the measurement's threads may read through

  std::uint64_t total_bytes() const { return cache_bytes * caches; }
  // Bytes read between two reads of the same cache ((caches − 1) × cache_bytes).
  std::uint64_t bytes_between_reads() const { return cache_bytes * (caches - 1); }
  // "cold (18 caches cycled)", "cold (flushed after each step)", "warm"
  std::string describe() const;
};

// Warm: `layers` caches. Cold by copies: enough caches (at least `layers`) that the bytes
// between two reads of one exceed kColdSpanPerLlc × llc_bytes × llcs (llcs: the last-level
// caches the threads may read through, last_level_caches_reached()):
// max(layers, ⌊4·llc·llcs / cache⌋ + 2). Cold by flush: `layers` caches, flushed after each
// step. Automatic picks copies unless they need more than half of `memory_bytes`, then flush.
// Throws std::invalid_argument for zero sizes and llcs < 1.
CachePlan plan_caches(std::uint64_t cache_bytes, std::uint64_t layers, CacheState state,
                      ColdMethod method, std::uint64_t llc_bytes, std::uint64_t memory_bytes,
                      int llcs);

// Last-level caches' worth of bytes that a cold rotation streams, per cache its threads may
// read through, between two reads of one cache. Four because these caches do not evict in LRU
// order, so lines survive a stream longer than the cache: with random replacement about e^-k
// of them after k caches' worth. Measured on the Zen 5 VM (2 threads, 32 MiB L3 reported,
// GQA-8 int8 at 2,000 tokens, 4.2 MB caches), the rotation's read loop at 2 × the LLC in all
// ran at 73-86 GB/s, at 4 × at 58-62, at 8 × (this rule, with 2 L3s) at 53-59 and at 16 × at
// 52-54; at 8 × as fast as over one cache flushed after each step.
inline constexpr std::uint64_t kColdSpanPerLlc = 4;

// The last-level caches `threads` threads may read through: on AMD each thread's own, for a
// core complex (CCD) has its L3 and a VM's guest, which sees one L3, may have its vCPUs on
// different ones; elsewhere one (Intel Xeon: one L3 per socket).
int last_level_caches_reached(int threads);

// How long a measurement runs untimed before it times anything: reads from memory come up to
// speed only after 10-50 ms of steady load (the Zen 5 VM: a 100 MB read loop went from 38 to
// 62 GB/s over its first 10 ms; GQA-8 int8 decode at 2,000 tokens from 125 to 115 us cold, and
// from 88 to 61 us warm over 10-50 ms), and a report's row times only a few steps.
inline constexpr double kWarmupSeconds = 0.05;

// Runs step() at least `min_steps` times and until `seconds` have passed; returns the count.
template <class Step>
int warm_up(int min_steps, double seconds, const Step& step) {
  using clock = std::chrono::steady_clock;
  const auto begin = clock::now();
  int steps = 0;
  while (steps < min_steps ||
         std::chrono::duration<double>(clock::now() - begin).count() < seconds) {
    step();
    ++steps;
  }
  return steps;
}

// Throws std::length_error (require_memory's message, naming the bytes and why) when the
// plan's caches cannot fit in this machine's memory.
void require_plan_memory(const CachePlan& plan, std::string_view what);
// The same for two plans allocated together (a paired measurement's two sets of caches):
// require_plans_memory of the two.
void require_pair_memory(const CachePlan& a, const CachePlan& b, std::string_view what);
// The same for any number of plans allocated together (a paired measurement's caches and the
// read loop's buffers beside them).
void require_plans_memory(const std::vector<CachePlan>& plans, std::string_view what);

// Evicts [data, data + bytes) from every cache level (clflushopt where the CPU has it,
// else clflush), split over `threads` threads, fenced. A no-op off x86.
void flush_from_caches(const void* data, std::size_t bytes, int threads);

// The caches of a plan and the order a measurement reads them in: step s reads caches
// (s·layers + l) mod caches for l = 0…layers−1.
class CacheRotation {
 public:
  // `first` (filled) becomes cache 0; the others are its clones. Checks memory first.
  CacheRotation(const CachePlan& plan, KvCache first);

  // The next cache of the current step; call plan.layers times per step.
  const KvCache& next();
  // Ends a step: with the flush method, evicts the caches just read (call it untimed).
  void end_step(int threads);

  const CachePlan& plan() const { return plan_; }
  std::size_t size() const { return caches_.size(); }
  const KvCache& cache(std::size_t i) const { return caches_.at(i); }
  const std::vector<std::size_t>& read_order() const { return read_order_; }  // every next()
  std::size_t flushes() const { return flushes_; }

 private:
  CachePlan plan_;
  std::vector<KvCache> caches_;
  std::size_t cursor_ = 0;
  std::vector<std::size_t> read_order_;
  std::vector<std::size_t> read_this_step_;
  std::size_t flushes_ = 0;
};

}  // namespace kvscope
