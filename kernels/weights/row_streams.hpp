#pragma once
// How a decode GEMV's thread reads its share of W's rows: as a few long sequential streams
// side by side, one row of each at a time, the way the read loop reads memory. Blocks of
// adjacent rows instead make every row its own stream, a page or two long, that the hardware
// prefetcher ramps up anew.
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

}  // namespace kvscope
