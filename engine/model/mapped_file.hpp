#pragma once
// A read-only memory mapping of a whole file: the pages of a multi-gigabyte weight file
// are read from disk only when a tensor in them is touched.
#include <cstddef>
#include <filesystem>
#include <span>

namespace kvscope {

class MappedFile {
 public:
  // Maps `path` read-only. Throws std::runtime_error naming the path and the OS error if it
  // cannot be opened or mapped. An empty file maps to an empty span.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace kvscope
