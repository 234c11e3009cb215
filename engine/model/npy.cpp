#include "engine/model/npy.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>

namespace kvscope {
namespace {

[[noreturn]] void fail(std::string_view label, const std::string& message) {
  throw std::runtime_error(std::string(label) + ": " + message);
}

// Reads the header dict, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view label) : text_(text), label_(label) {}

  void parse(std::string& descr, bool& fortran_order, std::vector<std::uint64_t>& shape) {
    bool has_descr = false, has_order = false, has_shape = false;
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = quoted();
      expect(':');
      if (key == "descr") {
        descr = quoted();
        has_descr = true;
      } else if (key == "fortran_order") {
        fortran_order = boolean();
        has_order = true;
      } else if (key == "shape") {
        shape = tuple();
        has_shape = true;
      } else {
        error("unexpected key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != '}') {
        error("expected ',' or '}'");
      }
    }
    ++pos_;
    skip_space();
    if (pos_ != text_.size()) error("text after the closing '}'");
    if (!has_descr || !has_order || !has_shape) {
      error("needs the keys 'descr', 'fortran_order' and 'shape'");
    }
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail(label_, "npy header " + what + " at character " + std::to_string(pos_) + " of \"" +
                     std::string(text_.substr(0, 120)) + "\"");
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) error(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string quoted() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') error("expected a quoted string");
    const std::size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) error("unterminated string");
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return s;
  }
  bool boolean() {
    skip_space();
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    error("expected True or False");
  }
  std::vector<std::uint64_t> tuple() {
    std::vector<std::uint64_t> dims;
    expect('(');
    for (;;) {
      skip_space();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') error("expected a dimension");
      std::uint64_t d = 0;
      while (peek() >= '0' && peek() <= '9') {
        const auto digit = static_cast<std::uint64_t>(peek() - '0');
        if (__builtin_mul_overflow(d, 10, &d) || __builtin_add_overflow(d, digit, &d)) {
          error("dimension overflows 64 bits");
        }
        ++pos_;
      }
      if (peek() == 'L') ++pos_;  // Python 2 long suffix
      dims.push_back(d);
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != ')') {
        error("expected ',' or ')' in shape");
      }
    }
    ++pos_;
    return dims;
  }

  std::string_view text_;
  std::string_view label_;
  std::size_t pos_ = 0;
};

std::uint32_t read_le(const std::byte* p, int bytes) {
  std::uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(p[i]);
  return v;
}

}  // namespace

NpyArray parse_npy(std::span<const std::byte> file, std::string_view label) {
  static constexpr char kMagic[] = "\x93NUMPY";
  if (file.size() < 10) {
    fail(label,
         "truncated: " + std::to_string(file.size()) + " bytes, an .npy file needs at least 10");
  }
  if (std::memcmp(file.data(), kMagic, 6) != 0) fail(label, "not an .npy file (bad magic string)");
  const auto major = static_cast<std::uint8_t>(file[6]);
  const auto minor = static_cast<std::uint8_t>(file[7]);
  if (major < 1 || major > 3 || minor != 0) {
    fail(label, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
                    " (1.0, 2.0 and 3.0 are read)");
  }
  const int length_bytes = major == 1 ? 2 : 4;
  if (file.size() < static_cast<std::size_t>(8 + length_bytes)) fail(label, "truncated header");
  const std::uint64_t header_bytes = read_le(file.data() + 8, length_bytes);
  const std::uint64_t header_begin = 8 + static_cast<std::uint64_t>(length_bytes);
  if (header_bytes > file.size() - header_begin) {
    fail(label, "header length " + std::to_string(header_bytes) + " runs past the end of the " +
                    std::to_string(file.size()) + "-byte file");
  }
  const std::string_view text(reinterpret_cast<const char*>(file.data() + header_begin),
                              header_bytes);
  std::string descr;
  bool fortran_order = false;
  NpyArray array;
  HeaderParser(text, label).parse(descr, fortran_order, array.shape);
  if (descr != "<f4") {
    fail(label, "dtype '" + descr + "' is not supported, expected little-endian float32 '<f4'");
  }
  if (fortran_order) fail(label, "Fortran-order arrays are not supported, save in C order");

  std::uint64_t count = 1;
  for (std::uint64_t d : array.shape) {
    if (__builtin_mul_overflow(count, d, &count)) fail(label, "shape overflows 64 bits");
  }
  const std::uint64_t data_begin = header_begin + header_bytes;
  const std::uint64_t data_bytes = file.size() - data_begin;
  if (count > data_bytes / 4 || count * 4 != data_bytes) {
    std::string shape;
    for (std::size_t i = 0; i < array.shape.size(); ++i) {
      shape += (i > 0 ? ", " : "") + std::to_string(array.shape[i]);
    }
    fail(label, "shape (" + shape + ") has " + std::to_string(count) +
                    " float32 values but the file holds " + std::to_string(data_bytes) +
                    " data bytes");
  }
  array.data.resize(count);
  if (count > 0) std::memcpy(array.data.data(), file.data() + data_begin, count * 4);
  return array;
}

NpyArray read_npy(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path.string(), std::string("cannot open: ") + std::strerror(errno));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail(path.string(), "read error");
  return parse_npy(std::as_bytes(std::span(bytes)), path.string());
}

void write_npy(const std::filesystem::path& path, std::span<const std::uint64_t> shape,
               std::span<const float> data) {
  // Python tuple syntax: (), (n,), (n, d).
  std::string tuple;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    tuple += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  }
  if (shape.size() == 1) tuple += ",";
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + tuple + "), }";
  // Pad with spaces so magic + version + length + header is a multiple of 64, ending in '\n'.
  const std::size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  if (dict.size() > 0xffff) fail(path.string(), "shape too long for an npy v1.0 header");

  std::string header = "\x93NUMPY";
  header += '\x01';
  header += '\x00';
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>(dict.size() >> 8);
  header += dict;

  std::filesystem::path temp = path;
  temp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) fail(path.string(), "cannot create " + temp.string() + ": " + std::strerror(errno));
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(data.data()),
              static_cast<std::streamsize>(data.size_bytes()));
    out.flush();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(temp, ignored);
      fail(path.string(), "write to " + temp.string() + " failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    fail(path.string(), "cannot rename " + temp.string() + " over it: " + ec.message());
  }
}

}  // namespace kvscope
