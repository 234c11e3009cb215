#pragma once
// How a decode GEMV's thread reads its share of W's rows: as a few long sequential streams
// side by side, one row of each at a time, the way the read loop reads memory. Blocks of
// adjacent rows instead make every row its own stream, a page or two long, that the hardware
// prefetcher ramps up anew.
#include <omp.h>

#include <cstddef>

namespace kvscope {

// Rows [first, end) of one thread, cut into `streams` runs of `length` rows: stream j's row t
// is first + j · length + t. Only the last streams may be shorter (or empty).
struct RowStreams {
  std::size_t first = 0, end = 0, length = 0;
  // How many streams have a row t (t < length): those are streams 0 .. count - 1.
  std::size_t streams_at(std::size_t t, std::size_t streams) const;
};

// Thread `me` of `threads`' rows of n (contiguous shares, as OpenMP's static schedule).
// Out of line, in a unit built for the baseline CPU: the per-ISA kernels all call it.
RowStreams row_streams(std::size_t n, std::size_t threads, std::size_t me, std::size_t streams);

// One pass of one thread: rows row_of(j) for j < rows, one of each stream.
struct StreamPass {
  std::size_t row = 0, rows = 0, apart = 0;  // apart: rows between one stream and the next
  bool last = false;                         // the thread's last pass
  std::size_t row_of(std::size_t j) const { return row + j * apart; }
};

// Runs pass(StreamPass) over `threads` OpenMP threads for every pass of every thread's share of
// n rows in `streams` streams. A template, so each per-ISA unit gets its own copy.
template <class Pass>
void for_each_stream_pass(std::size_t n, std::size_t streams, int threads, Pass pass) {
#pragma omp parallel num_threads(threads)
  {
    const RowStreams mine = row_streams(n, static_cast<std::size_t>(omp_get_num_threads()),
                                        static_cast<std::size_t>(omp_get_thread_num()), streams);
    for (std::size_t t = 0; t < mine.length; ++t) {
      pass(StreamPass{mine.first + t, mine.streams_at(t, streams), mine.length,
                      t + 1 == mine.length});
    }
  }
}

}  // namespace kvscope
