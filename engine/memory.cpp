#include "engine/memory.hpp"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace kvscope {
namespace {

std::string gib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

}  // namespace

std::uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return UINT64_MAX;  // unknown: do not refuse
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size);
}

void require_memory(std::uint64_t bytes, std::string_view what) {
  const std::uint64_t available = physical_memory_bytes();
  if (bytes > available) {
    throw std::length_error(std::string(what) + " needs " + gib(bytes) + " (" +
                            std::to_string(bytes) + " bytes) but this machine has " +
                            gib(available) + " of memory");
  }
}

std::uint64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

void BufferDeleter::operator()(void* p) const noexcept {
  if (mapped_bytes > 0) {
    ::munmap(p, mapped_bytes);
  } else {
    std::free(p);
  }
}

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

// `bytes` (a multiple of kHugePage) of fresh anonymous memory at a 2 MiB boundary, asked for
// as huge pages; nullptr when the mapping fails.
std::byte* map_huge_aligned(std::size_t bytes) {
  const std::size_t span = bytes + kHugePage;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto* base = static_cast<std::byte*>(raw);
  const std::size_t head =
      (kHugePage - reinterpret_cast<std::uintptr_t>(base) % kHugePage) % kHugePage;
  if (head > 0) ::munmap(base, head);
  ::munmap(base + head + bytes, kHugePage - head);  // the tail past the aligned range
  ::madvise(base + head, bytes, MADV_HUGEPAGE);
  return base + head;
}

}  // namespace

AlignedBuffer::AlignedBuffer(std::size_t bytes, std::string_view what)
    : bytes_(round_up_to_cache_line(bytes)) {
  if (bytes_ < bytes) throw std::length_error(std::string(what) + " size overflows");
  require_memory(bytes_, what);
  if (bytes_ == 0) return;
  // Large buffers (KV caches, their cold copies, the read loop's) are mapped on their own and
  // ask for 2 MiB pages before their first touch. Each 4 KiB page a step reads for the first
  // time in a while costs a page walk (two-level under a hypervisor), and the walk holds up
  // the prefetch that starts it. Measured on a Zen 5 VM, caches cycled cold: MQA int8 decode
  // at 32,768 tokens 0.82 ms against 0.92-0.96 on 4 KiB pages, the plain read loop 57-75 GB/s
  // against 28-36, and the report's setup (page faults over 3 GB) 3× shorter. Their own
  // mapping, not malloc's heap: a huge-page range left in the heap after a free made later
  // small allocations at its top fault in (and zero) 2 MiB pages inside timed steps, up to
  // 12× slower report rows. With THP off ("never") the advice is a no-op.
  // From 2 MiB, a buffer that fills its huge pages to within a sixteenth maps too: a paged
  // cache's slabs of pages (just under 4 MiB) were left on 4 KiB pages, and MHA int8 decode
  // over pages of 16 took 1.5x the contiguous step (Intel Xeon, 32,768 tokens).
  const std::size_t whole = (bytes_ + kHugePage - 1) / kHugePage * kHugePage;
  if (bytes_ >= 2 * kHugePage || (bytes_ >= kHugePage && whole - bytes_ <= bytes_ / 16)) {
    data_ =
        std::unique_ptr<std::byte, BufferDeleter>(map_huge_aligned(whole), BufferDeleter{whole});
  } else {
    data_.reset(static_cast<std::byte*>(std::aligned_alloc(kCacheLineBytes, bytes_)));
  }
  if (!data_) throw std::bad_alloc();
  std::memset(data_.get(), 0, bytes_);
}

std::string with_commas(std::uint64_t n) {
  const std::string plain = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < plain.size(); ++i) {
    if (i > 0 && (plain.size() - i) % 3 == 0) out += ',';
    out += plain[i];
  }
  return out;
}

std::string format_bytes(std::uint64_t bytes) {
  char mib[48];
  std::snprintf(mib, sizeof mib, " bytes (%.2f MiB)", static_cast<double>(bytes) / (1 << 20));
  return with_commas(bytes) + mib;
}

}  // namespace kvscope
