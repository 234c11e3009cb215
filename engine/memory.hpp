#pragma once
// 64-byte aligned buffers, and refusing allocations that cannot fit before making them.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace kvscope {

inline constexpr std::size_t kCacheLineBytes = 64;

// Rounds n up to a multiple of 64.
constexpr std::size_t round_up_to_cache_line(std::size_t n) {
  return (n + kCacheLineBytes - 1) / kCacheLineBytes * kCacheLineBytes;
}

// Total physical memory of this machine in bytes.
std::uint64_t physical_memory_bytes();

// Throws std::length_error ("<what> needs X GiB but this machine has Y GiB") when `bytes`
// exceed the physical memory, so an impossible shape fails before anything is allocated.
void require_memory(std::uint64_t bytes, std::string_view what);

// The peak resident set size of this process so far, in bytes.
std::uint64_t peak_rss_bytes();

// Frees an AlignedBuffer's storage: munmap for the large ones mapped on their own, else free.
struct BufferDeleter {
  std::size_t mapped_bytes = 0;
  void operator()(void* p) const noexcept;
};

// Zero-filled, 64-byte aligned storage of `bytes` (rounded up to 64). Throws std::bad_alloc
// with require_memory's message when it cannot be had. Every page is written here (memset),
// before anything is timed: on these VMs a page's first access from the process is a trip to
// the hypervisor. (MAP_POPULATE instead halved the setup, 1.9-2.3 s against 3.9-4.6 s for
// 1.2 GB, but such pages read at 1-10 GB/s on their first sweep even after being written,
// then at 30 GB/s: the cold measurements then timed that first sweep. Measured, reverted.)
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(std::size_t bytes, std::string_view what);

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  std::size_t bytes() const { return bytes_; }

  template <class T>
  T* as() {
    return reinterpret_cast<T*>(data_.get());
  }
  template <class T>
  const T* as() const {
    return reinterpret_cast<const T*>(data_.get());
  }

 private:
  std::unique_ptr<std::byte, BufferDeleter> data_;
  std::size_t bytes_ = 0;
};

// "65,536,000"
std::string with_commas(std::uint64_t n);

// Formats a byte count as "65,536,000 bytes (62.50 MiB)".
std::string format_bytes(std::uint64_t bytes);

}  // namespace kvscope
