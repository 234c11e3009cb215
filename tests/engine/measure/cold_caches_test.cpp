// Cold and warm plans: how many caches, the order they are read in, the bytes between two
// reads of one, the flush fallback and the memory refusal (never timings).
#include "engine/measure/cold_caches.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <stdexcept>

#include "engine/measure/decode_timing.hpp"
#include "engine/measure/machine_limits.hpp"
#include "engine/memory.hpp"
#include "kernels/units/cpu_features.hpp"

namespace kvscope {
namespace {

constexpr std::uint64_t kMiB = 1 << 20, kPlenty = std::uint64_t{1} << 40;

TEST(CachePlan, WarmReadsTheLayersCaches) {
  const CachePlan p =
      plan_caches(kMiB, 3, CacheState::warm, ColdMethod::automatic, 4 * kMiB, kPlenty, 1);
  EXPECT_EQ(p.caches, 3u);
  EXPECT_EQ(p.describe(), "warm");
}

TEST(CachePlan, ColdCopiesPassFourLastLevelCachesBetweenReads) {
  const CachePlan p =
      plan_caches(kMiB, 1, CacheState::cold, ColdMethod::automatic, 4 * kMiB, kPlenty, 1);
  EXPECT_EQ(p.method, ColdMethod::copies);
  EXPECT_EQ(p.caches, 18u);  // 17 others × 1 MiB > 16 MiB; 16 would not be more than 16
  EXPECT_GT(p.bytes_between_reads(), 4 * p.llc_bytes);
  EXPECT_LE(p.bytes_between_reads() - p.cache_bytes, 4 * p.llc_bytes);
  EXPECT_EQ(p.total_bytes(), 18 * kMiB);
  // Odd sizes round the right way.
  const CachePlan odd =
      plan_caches(3 * kMiB, 1, CacheState::cold, ColdMethod::copies, 4 * kMiB, kPlenty, 1);
  EXPECT_GT(odd.bytes_between_reads(), 16 * kMiB);
  EXPECT_EQ(odd.caches, 7u);
}

TEST(CachePlan, FourOfEveryLastLevelCacheTheThreadsReach) {
  const CachePlan two =
      plan_caches(kMiB, 1, CacheState::cold, ColdMethod::automatic, 4 * kMiB, kPlenty, 2);
  EXPECT_EQ(two.caches, 34u);  // 33 × 1 MiB > 2 L3s × 4 × 4 MiB
  EXPECT_EQ(two.llcs, 2);
  EXPECT_GT(two.bytes_between_reads(), 2 * 4 * two.llc_bytes);
  EXPECT_THROW(plan_caches(kMiB, 1, CacheState::cold, ColdMethod::automatic, 4 * kMiB, kPlenty, 0),
               std::invalid_argument);
}

// AMD's L3 belongs to a core complex, and a VM's vCPUs may sit on different ones: every thread
// may read through its own. Elsewhere one L3 serves the socket.
TEST(CachePlan, LastLevelCachesTheThreadsReach) {
  EXPECT_EQ(last_level_caches_reached(2), cpu_features().amd ? 2 : 1);
  EXPECT_EQ(last_level_caches_reached(1), 1);
  EXPECT_EQ(last_level_caches_reached(0), 1);
}

TEST(CachePlan, AModelsOwnLayersAreEnoughWhenTheyExceedTheCache) {
  const CachePlan p =
      plan_caches(kMiB, 32, CacheState::cold, ColdMethod::automatic, 4 * kMiB, kPlenty, 1);
  EXPECT_EQ(p.caches, 32u);
  EXPECT_EQ(p.method, ColdMethod::copies);
  const CachePlan few =
      plan_caches(kMiB, 3, CacheState::cold, ColdMethod::automatic, 4 * kMiB, kPlenty, 1);
  EXPECT_EQ(few.caches, 18u);
}

TEST(CachePlan, FlushWhenCopiesDoNotFitOrWhenAsked) {
  const CachePlan p = plan_caches(kMiB, 2, CacheState::cold, ColdMethod::automatic, 4 * kMiB,
                                  32 * kMiB, 1);  // copies would need 18 MiB of half of 32
  EXPECT_EQ(p.method, ColdMethod::flush);
  EXPECT_EQ(p.caches, 2u);
  EXPECT_EQ(p.describe(), "cold (flushed after each step)");
  EXPECT_EQ(plan_caches(kMiB, 1, CacheState::cold, ColdMethod::flush, 4 * kMiB, kPlenty, 1).caches,
            1u);
}

TEST(CachePlan, RefusesZeroSizesAndPlansLargerThanMemory) {
  EXPECT_THROW(plan_caches(0, 1, CacheState::cold, ColdMethod::automatic, kMiB, kPlenty, 1),
               std::invalid_argument);
  EXPECT_THROW(plan_caches(kMiB, 0, CacheState::cold, ColdMethod::automatic, kMiB, kPlenty, 1),
               std::invalid_argument);
  const CachePlan huge = plan_caches(kMiB, 1, CacheState::cold, ColdMethod::copies,
                                     std::uint64_t{1} << 50, kPlenty, 1);
  try {
    require_plan_memory(huge, "the test");
    FAIL() << "accepted copies larger than memory";
  } catch (const std::length_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the test"), std::string::npos) << what;
    EXPECT_NE(what.find("bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("last-level cache"), std::string::npos) << what;
  }
}

// A paired measurement's two sets of caches: each may fit alone and the two not.
TEST(RequirePairMemory, CountsBothPlans) {
  const std::uint64_t memory = physical_memory_bytes();
  CachePlan most;  // about 60% of memory
  most.cache_bytes = memory / 10;
  most.caches = 6;
  EXPECT_NO_THROW(require_plan_memory(most, "one"));
  try {
    require_pair_memory(most, most, "the pair");
    FAIL() << "accepted two sets of 60% of memory";
  } catch (const std::length_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the pair"), std::string::npos) << what;
    EXPECT_NE(what.find("6 caches of"), std::string::npos) << what;
  }
  CachePlan some = most;  // about 30%
  some.caches = 3;
  EXPECT_NO_THROW(require_pair_memory(most, some, "the pair"));
}

TEST(RequirePlansMemory, CountsEveryPlan) {
  const std::uint64_t memory = physical_memory_bytes();
  CachePlan third;  // about 30% of memory
  third.cache_bytes = memory / 10;
  third.caches = 3;
  EXPECT_NO_THROW(require_plans_memory({third, third}, "two"));
  try {
    require_plans_memory({third, third, third, third}, "four sets");
    FAIL() << "accepted four sets of 30% of memory";
  } catch (const std::length_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("four sets"), std::string::npos) << what;
    EXPECT_NE(what.find("3 of "), std::string::npos) << what;
  }
}

TEST(CacheStateNames, ParseAndPrint) {
  EXPECT_EQ(parse_cache_state("cold"), CacheState::cold);
  EXPECT_EQ(parse_cache_state("warm"), CacheState::warm);
  EXPECT_EQ(to_string(CacheState::cold), "cold");
  EXPECT_EQ(parse_cold_method("flush"), ColdMethod::flush);
  EXPECT_EQ(parse_cold_method("auto"), ColdMethod::automatic);
  EXPECT_THROW(parse_cache_state("tepid"), std::invalid_argument);
  EXPECT_THROW(parse_cold_method("hope"), std::invalid_argument);
}

KvCache filled_cache() {
  KvCache cache(2, 16, 32, KvDtype::int8);
  std::vector<float> k(32 * 2 * 16), v(k.size());
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = 0.01f * (i % 97), v[i] = -0.02f * (i % 89);
  cache.append(k.data(), v.data(), 32);
  return cache;
}

TEST(CacheRotation, AllocatesThePlannedCopiesWithTheSameBytes) {
  KvCache first = filled_cache();
  const std::size_t bytes = first.bytes();
  const CachePlan plan =
      plan_caches(bytes, 2, CacheState::cold, ColdMethod::copies, bytes, kPlenty, 2);
  ASSERT_EQ(plan.caches, 10u);  // 9 × bytes > 2 L3s × 4 × bytes
  CacheRotation rotation(plan, std::move(first));
  ASSERT_EQ(rotation.size(), 10u);
  const KvView a = rotation.cache(0).view();
  for (std::size_t i = 1; i < rotation.size(); ++i) {
    const KvView b = rotation.cache(i).view();
    EXPECT_NE(a.k, b.k);
    EXPECT_EQ(rotation.cache(i).size(), 32u);
    EXPECT_EQ(std::memcmp(a.k, b.k, a.n_kv_heads * a.k_head_stride_bytes), 0);
    EXPECT_EQ(std::memcmp(a.v_scale, b.v_scale, 2 * 32 * sizeof(float)), 0);
  }
}

TEST(CacheRotation, EveryReadHasFourLastLevelCachesSinceTheLastReadOfItsCache) {
  KvCache first = filled_cache();
  const std::size_t bytes = first.bytes();
  const CachePlan plan =
      plan_caches(bytes, 3, CacheState::cold, ColdMethod::copies, 5 * bytes / 2, kPlenty, 1);
  CacheRotation rotation(plan, std::move(first));
  for (int step = 0; step < 7; ++step) {
    for (std::size_t l = 0; l < plan.layers; ++l) (void)rotation.next();
    rotation.end_step(1);
  }
  const std::vector<std::size_t>& order = rotation.read_order();
  ASSERT_EQ(order.size(), 21u);
  std::map<std::size_t, std::size_t> last;
  std::size_t reread = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (auto it = last.find(order[i]); it != last.end()) {
      EXPECT_GT((i - it->second - 1) * bytes, 4 * plan.llc_bytes) << "read " << i;
      ++reread;
    }
    last[order[i]] = i;
  }
  EXPECT_EQ(last.size(), plan.caches);  // every copy read
  EXPECT_GT(reread, 0u);
  EXPECT_EQ(rotation.flushes(), 0u);
}

TEST(CacheRotation, FlushMethodFlushesAfterEachStepAndKeepsTheData) {
  KvCache first = filled_cache();
  const KvCache reference = first.clone();
  const CachePlan plan =
      plan_caches(first.bytes(), 1, CacheState::cold, ColdMethod::flush, kMiB, kPlenty, 1);
  CacheRotation rotation(plan, std::move(first));
  ASSERT_EQ(rotation.size(), 1u);
  for (int step = 0; step < 3; ++step) {
    EXPECT_EQ(&rotation.next(), &rotation.cache(0));
    rotation.end_step(2);
  }
  EXPECT_EQ(rotation.flushes(), 3u);
  const KvView a = rotation.cache(0).view(), b = reference.view();
  EXPECT_EQ(std::memcmp(a.k, b.k, a.n_kv_heads * a.k_head_stride_bytes), 0);
}

TEST(DecodeTiming, LayersAllocateACachePerLayerAndAStepReadsThemAll) {
  const DecodeTiming t = time_attention_decode({.n_heads = 4,
                                                .n_kv_heads = 2,
                                                .head_dim = 16,
                                                .tokens = 64,
                                                .steps = 3,
                                                .layers = 3,
                                                .cache_state = CacheState::warm});
  EXPECT_EQ(t.plan.caches, 3u);
  EXPECT_EQ(t.bytes_read_per_layer, 2u * 2 * 16 * 4 * 64);
  EXPECT_EQ(t.bytes_read_per_step, 3 * t.bytes_read_per_layer);
  EXPECT_DOUBLE_EQ(t.layer_median_s, t.median_s / 3);
}

TEST(DecodeTiming, ColdCyclesCopiesOrFallsBackOrRefuses) {
  const DecodeTimingRequest base{.n_heads = 4,
                                 .n_kv_heads = 2,
                                 .head_dim = 16,
                                 .tokens = 64,
                                 .threads = 2,
                                 .steps = 2,
                                 .llc_bytes = 64 << 10};
  const DecodeTiming cold = time_attention_decode(base);
  EXPECT_EQ(cold.plan.state, CacheState::cold);
  EXPECT_EQ(cold.plan.method, ColdMethod::copies);
  const auto llcs = static_cast<std::uint64_t>(last_level_caches_reached(2));  // 2 threads
  EXPECT_EQ(cold.plan.llcs, static_cast<int>(llcs));
  EXPECT_EQ(cold.plan.caches, (4u * llcs * (64 << 10)) / cold.plan.cache_bytes + 2);
  EXPECT_EQ(cold.llc_source, "given");

  DecodeTimingRequest huge = base;
  huge.llc_bytes = std::uint64_t{1} << 50;  // copies cannot fit: automatic flushes instead
  EXPECT_EQ(time_attention_decode(huge).plan.method, ColdMethod::flush);
  huge.cold_method = ColdMethod::copies;  // asked for copies: refused, naming the bytes
  try {
    time_attention_decode(huge);
    FAIL() << "allocated copies larger than memory";
  } catch (const std::length_error& e) {
    EXPECT_NE(std::string(e.what()).find("needs"), std::string::npos) << e.what();
  }
  DecodeTimingRequest no_layers = base;
  no_layers.layers = 0;
  EXPECT_THROW(time_attention_decode(no_layers), std::invalid_argument);
}

TEST(MachineLimits, ColdReadLoopRunsThePlanAndRefusesWhatCannotFit) {
  const CachePlan plan =
      plan_caches(64 << 10, 2, CacheState::cold, ColdMethod::copies, 256 << 10, kPlenty, 1);
  EXPECT_GT(measure_read_bandwidth_gbps(plan, Isa::scalar, 1, 3), 0.0);
  const CachePlan flush =
      plan_caches(64 << 10, 1, CacheState::cold, ColdMethod::flush, 256 << 10, kPlenty, 1);
  EXPECT_GT(measure_read_bandwidth_gbps(flush, Isa::scalar, 1, 3), 0.0);
  const CachePlan huge = plan_caches(kMiB, 1, CacheState::cold, ColdMethod::copies,
                                     std::uint64_t{1} << 50, kPlenty, 1);
  EXPECT_THROW(measure_read_bandwidth_gbps(huge, Isa::scalar, 1, 3), std::length_error);
  // A step at a time: each step sweeps `layers` buffers' bytes, flushed or not.
  ReadLoop loop(plan, Isa::scalar, 1);
  EXPECT_EQ(loop.step_bytes(), 2u * (64 << 10));
  for (int i = 0; i < 2 * static_cast<int>(plan.caches) + 1; ++i) EXPECT_GT(loop.step(), 0.0);
  ReadLoop flushed(flush, Isa::scalar, 1);
  EXPECT_EQ(flushed.step_bytes(), 64u << 10);
  EXPECT_GT(flushed.step(), 0.0);
}

}  // namespace
}  // namespace kvscope
