#include "engine/decoder_layer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <stdexcept>
#include <string>

#include "kernels/attention.hpp"
#include "kernels/ref/layer_ops_ref.hpp"

namespace kvscope {
namespace {

// b's first `count` elements, grown (never shrunk) to hold them; contents unspecified.
float* room(std::vector<float>& b, std::size_t count) {
  if (b.size() < count) b.resize(count);
  return b.data();
}

// The row-wise scalar ops over n rows, rows split over `threads` (each row's result is the
// same on any thread count) where there is enough work to pay for a parallel region (not a
// decode step's): the SwiGLU's exponentials alone took 60 ms of a 2,000-token prefill on
// one core.
constexpr std::size_t kParallelElements = 65536;

void rmsnorm_rows(const float* x, const float* weight, std::size_t n, std::size_t width, float eps,
                  float* y, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static) if (n * width > kParallelElements)
  for (long r = 0; r < static_cast<long>(n); ++r) {
    const auto row = static_cast<std::size_t>(r) * width;
    rmsnorm_ref(x + row, weight, 1, width, eps, y + row);
  }
}

void swiglu_rows(float* gate, const float* up, std::size_t n, std::size_t width, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static) if (n * width > kParallelElements)
  for (long r = 0; r < static_cast<long>(n); ++r) {
    const auto row = static_cast<std::size_t>(r) * width;
    swiglu_ref(gate + row, up + row, width);
  }
}

// y[i] += x[i] for i < count.
void add_rows(float* y, const float* x, std::size_t count, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static) if (count > kParallelElements)
  for (long i = 0; i < static_cast<long>(count); ++i) y[i] += x[i];
}

// y[r] += bias for each of n rows of `width` (no-op for an empty bias).
void add_bias(float* y, const std::vector<float>& bias, std::size_t n, std::size_t width) {
  if (bias.empty()) return;
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t i = 0; i < width; ++i) y[r * width + i] += bias[i];
}

}  // namespace

DecoderLayer::DecoderLayer(const LayerConfig& config, LayerWeights weights, Options options)
    : config_(config),
      weights_(std::move(weights)),
      options_(options),
      pool_(options.kv_layout.paged() && !config.is_mla()
                ? std::make_shared<KvPagePool>(
                      KvPageGeometry(config.n_kv_heads(), config.head_dim(),
                                     options.kv_layout.page_tokens, options.kv_dtype))
                : nullptr),
      // An MLA layer keeps its latent cache in mla_; own_.cache then stays an unused minimum.
      own_{config.is_mla() ? KvCache(1, 2, 1, KvDtype::f32) : make_cache(), 0},
      projector_(options.isa, options.threads, options.compute) {
  weights_.check_shapes(config_);
  if (config_.is_mla() && options_.kv_layout.paged()) {
    throw std::invalid_argument("MLA's latent cache is contiguous only, not kv layout " +
                                to_string(options_.kv_layout));
  }
  if (options_.threads < 1) {
    throw std::invalid_argument("threads must be at least 1, got " +
                                std::to_string(options_.threads));
  }
  if (config_.is_mla()) {
    if (options_.kv_dtype != KvTypes(KvDtype::f32)) {
      throw std::invalid_argument("MLA's latent cache holds f32 only, not kv dtype " +
                                  to_string(options_.kv_dtype));
    }
    mla_.emplace(config_, options_.threads);
  }
}

LayerSequence DecoderLayer::new_sequence() const {
  if (mla_) throw std::logic_error("new_sequence: batches of MLA layers are not implemented");
  return {make_cache(), 0};
}

KvCache DecoderLayer::make_cache() const {
  if (pool_) return KvCache(config_, options_.kv_dtype, pool_);
  return KvCache(config_, options_.kv_dtype);
}

std::vector<float> DecoderLayer::prefill(LayerSequence& sequence, const float* x, std::size_t n) {
  if (n == 0) throw std::invalid_argument("prefill needs at least one token");
  return forward(x, {{&sequence, n}});
}

std::vector<float> DecoderLayer::decode_batch(const float* x,
                                              const std::vector<LayerSequence*>& sequences) {
  if (sequences.empty()) throw std::invalid_argument("a batch needs at least one sequence");
  std::vector<Run> runs;
  for (std::size_t b = 0; b < sequences.size(); ++b) {
    if (sequences[b] == nullptr)
      throw std::invalid_argument("sequence " + std::to_string(b) + " of the batch is null");
    for (std::size_t a = 0; a < b; ++a) {
      if (sequences[a] == sequences[b]) {
        throw std::invalid_argument("sequences " + std::to_string(a) + " and " + std::to_string(b) +
                                    " of the batch are the same: one token per sequence a step");
      }
    }
    runs.push_back({sequences[b], 1});
  }
  return forward(x, runs);
}

void DecoderLayer::reserve_rows(std::size_t n) {
  const LayerConfig& c = config_;
  const std::size_t hidden = c.hidden_size();
  for (std::vector<float>* b : {&act_.h, &act_.y}) room(*b, n * hidden);
  room(act_.gate, n * c.ffn_size());
  room(act_.up, n * c.ffn_size());
  room(act_.heads, n * std::max(c.q_width(), c.o_width()));
  if (!mla_) {
    room(act_.q, n * c.q_width());
    room(act_.k, n * c.kv_width());
    room(act_.v, n * c.kv_width());
  }
  const std::size_t widest = std::max({hidden, c.ffn_size(), c.q_width(), c.o_width()});
  projector_.reserve(n, widest, widest);
}

std::vector<float> DecoderLayer::forward(const float* x, const std::vector<Run>& runs) {
  const LayerConfig& c = config_;
  const LayerWeights& w = weights_;
  const std::size_t hidden = c.hidden_size();
  std::size_t n = 0;
  if (mla_ && (runs.size() != 1 || runs[0].sequence != &own_)) {
    throw std::invalid_argument(
        "an MLA layer runs its own sequence only: batches and "
        "sequences of MLA layers are not implemented");
  }
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const LayerSequence& s = *runs[r].sequence;
    const std::string which =
        runs.size() > 1 ? "sequence " + std::to_string(r) + " of the batch: " : "";
    if (!mla_ &&
        (s.cache.n_kv_heads() != c.n_kv_heads() || s.cache.head_dim() != c.head_dim() ||
         s.cache.capacity() != c.cache_rows() || !(s.cache.types() == options_.kv_dtype))) {
      throw std::invalid_argument(which +
                                  "its cache was made for another layer shape or cache type "
                                  "(use DecoderLayer::new_sequence())");
    }
    if (runs[r].rows > c.capacity() - s.position) {
      throw std::length_error(which + "tokens beyond capacity: the layer holds " +
                              std::to_string(s.position) + " of " + std::to_string(c.capacity()) +
                              " tokens, " + std::to_string(runs[r].rows) + " more do not fit");
    }
    n += runs[r].rows;
  }
  for (std::size_t i = 0; i < n * hidden; ++i) {
    if (!std::isfinite(x[i])) {
      throw std::invalid_argument("input token " + std::to_string(i / hidden) + ", element " +
                                  std::to_string(i % hidden) + " is not finite (" +
                                  std::to_string(x[i]) + ")");
    }
  }

  // Attention block.
  const int threads = options_.threads;
  float* h = room(act_.h, n * hidden);
  rmsnorm_rows(x, w.attn_norm.data(), n, hidden, c.rms_norm_eps(), h, threads);
  float* y = room(act_.y, n * hidden);
  if (mla_) {
    float* heads = room(act_.heads, n * c.o_width());
    // Attention's time without the projections it makes (kv_b_proj's through projector_).
    const double projections_before = projector_.seconds();
    const auto attention_start = std::chrono::steady_clock::now();
    mla_->forward(h, n, w, projector_, heads);
    attention_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - attention_start).count() -
        (projector_.seconds() - projections_before);
    own_.position += n;
    projector_(heads, w.wo.view(), n, y);
  } else {
    attention_block(h, runs, n, y);
  }
  add_rows(y, x, n * hidden, threads);

  // MLP block (SwiGLU).
  rmsnorm_rows(y, w.mlp_norm.data(), n, hidden, c.rms_norm_eps(), h, threads);
  float* gate = room(act_.gate, n * c.ffn_size());
  float* up = room(act_.up, n * c.ffn_size());
  projector_(h, w.w_gate.view(), n, gate);
  projector_(h, w.w_up.view(), n, up);
  swiglu_rows(gate, up, n, c.ffn_size(), threads);
  std::vector<float> out(n * hidden);
  projector_(gate, w.w_down.view(), n, out.data());
  add_rows(out.data(), y, n * hidden, threads);
  return out;
}

// Every row through the projections at once; each run's rows at its own sequence's next
// positions, attending over its own cache.
void DecoderLayer::attention_block(const float* h, const std::vector<Run>& runs, std::size_t n,
                                   float* y) {
  const LayerConfig& c = config_;
  const LayerWeights& w = weights_;
  const std::size_t hidden = c.hidden_size();
  float* q = room(act_.q, n * c.q_width());
  float* k = room(act_.k, n * c.kv_width());
  float* v = room(act_.v, n * c.kv_width());
  projector_(h, w.wq.view(), n, q);
  projector_(h, w.wk.view(), n, k);
  projector_(h, w.wv.view(), n, v);
  add_bias(q, w.bq, n, c.q_width());
  add_bias(k, w.bk, n, c.kv_width());
  add_bias(v, w.bv, n, c.kv_width());
  if (c.qk_norm()) {  // every head's vector normalized on its own, in place
    rmsnorm_rows(q, w.q_norm.data(), n * c.n_heads(), c.head_dim(), c.rms_norm_eps(), q,
                 options_.threads);
    rmsnorm_rows(k, w.k_norm.data(), n * c.n_kv_heads(), c.head_dim(), c.rms_norm_eps(), k,
                 options_.threads);
  }
  std::size_t row = 0;
  for (const Run& run : runs) {  // each row at its own sequence's next position
    for (std::size_t i = 0; i < run.rows; ++i, ++row) {
      const std::size_t pos = run.sequence->position + i;
      rope_table_ref(q + row * c.q_width(), c.n_heads(), c.head_dim(), pos,
                     c.rope_inv_freq().data());
      rope_table_ref(k + row * c.kv_width(), c.n_kv_heads(), c.head_dim(), pos,
                     c.rope_inv_freq().data());
    }
  }
  float* heads = room(act_.heads, n * c.q_width());
  const auto attention_start = std::chrono::steady_clock::now();
  std::vector<std::size_t> first_row(runs.size());
  row = 0;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    first_row[r] = row;
    row += runs[r].rows;
  }
  const auto attend_run = [&](std::size_t r, int threads) {  // a sequence over its own cache
    const std::size_t f = first_row[r];
    attend_new_tokens(*runs[r].sequence, q + f * c.q_width(), k + f * c.kv_width(),
                      v + f * c.kv_width(), runs[r].rows, heads + f * c.q_width(), threads);
  };
  if (runs.size() >= static_cast<std::size_t>(options_.threads) && options_.threads > 1) {
    // At least one sequence per thread: each thread takes whole sequences (each reads its own
    // cache) instead of every sequence being split over all threads and joined.
    std::exception_ptr failure;
#pragma omp parallel for num_threads(options_.threads) schedule(dynamic)
    for (long r = 0; r < static_cast<long>(runs.size()); ++r) {
      try {
        attend_run(static_cast<std::size_t>(r), 1);
      } catch (...) {
#pragma omp critical(kvscope_batch_failure)
        if (!failure) failure = std::current_exception();
      }
    }
    if (failure) std::rethrow_exception(failure);
  } else {
    for (std::size_t r = 0; r < runs.size(); ++r) attend_run(r, options_.threads);
  }
  attention_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - attention_start).count();
  projector_(heads, w.wo.view(), n, y);
  add_bias(y, w.bo, n, hidden);
}

// Without a window, or while the ring has not wrapped (every position < W, so every earlier
// key is within the window), the cache holds positions in order and one causal attention call
// covers the tokens. Past that, each token is appended to the ring, overwriting the key that
// just left its window, and attends as a decode step to the W rows there: exactly the keys
// j with 0 ≤ i − j < W. Every kernel (scalar, SIMD, dot units) then sees a plain full cache.
void DecoderLayer::attend_new_tokens(LayerSequence& sequence, const float* q, const float* k,
                                     const float* v, std::size_t n, float* heads, int threads) {
  const LayerConfig& c = config_;
  KvCache& cache = sequence.cache;
  std::size_t& position = sequence.position;
  const std::size_t rows = cache.capacity();
  const std::size_t in_order = position < rows ? std::min(n, rows - position) : 0;
  if (in_order > 0) {
    cache.append_ring(k, v, in_order, threads);
    attend({.q = q,
            .n_queries = in_order,
            .first_pos = position,
            .n_heads = c.n_heads(),
            .kv = cache.view(),
            .out = heads},
           options_.isa, threads, options_.compute);
    position += in_order;
  }
  for (std::size_t i = in_order; i < n; ++i, ++position) {
    cache.append_ring(k + i * c.kv_width(), v + i * c.kv_width(), 1);
    attend({.q = q + i * c.q_width(),
            .n_queries = 1,
            .first_pos = rows - 1,  // the query sees all `rows` ring rows
            .n_heads = c.n_heads(),
            .kv = cache.view(),
            .out = heads + i * c.q_width()},
           options_.isa, threads, options_.compute);
  }
}

}  // namespace kvscope
