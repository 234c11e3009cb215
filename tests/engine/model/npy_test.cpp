// The .npy reader and writer: round trips, the three header versions, atomic writes, and
// one clear error for every malformed file.
#include "engine/model/npy.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "support/model_files.hpp"

namespace kvscope {
namespace {

using test::TempDir;

// An .npy file of the given version with `dict` as header text (padded to 64) and `data`.
std::string npy_bytes(int major, const std::string& dict, const std::string& data) {
  const int length_bytes = major == 1 ? 2 : 4;
  std::string text = dict;
  const std::size_t unpadded = 8 + length_bytes + text.size() + 1;
  text.append((64 - unpadded % 64) % 64, ' ');
  text += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  for (int i = 0; i < length_bytes; ++i) out += static_cast<char>((text.size() >> (8 * i)) & 0xff);
  return out + text + data;
}

std::string floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

NpyArray parse(const std::string& bytes) {
  return parse_npy(std::as_bytes(std::span(bytes.data(), bytes.size())), "x.npy");
}

void expect_error(const std::string& bytes, const std::string& part) {
  try {
    parse(bytes);
    FAIL() << "no exception for " << part;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("x.npy"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(Npy, ReadsVersions1To3) {
  for (int major : {1, 2, 3}) {
    const NpyArray a =
        parse(npy_bytes(major, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                        floats({1, 2, 3, 4, 5, 6})));
    EXPECT_EQ(a.shape, (std::vector<std::uint64_t>{2, 3}));
    EXPECT_EQ(a.data, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  }
  // Key order, double quotes, no trailing comma, 1-D and 0-D shapes.
  EXPECT_EQ(parse(npy_bytes(1, R"({"shape": (2,), "fortran_order": False, "descr": "<f4"})",
                            floats({7, 8})))
                .shape,
            (std::vector<std::uint64_t>{2}));
  EXPECT_EQ(
      parse(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", floats({9})))
          .data,
      (std::vector<float>{9}));
}

TEST(Npy, WriteThenReadRoundTrips) {
  TempDir dir;
  const std::vector<float> data = {1.5f, -2.0f, 3.25f, 0.0f, 5.0f, 6.0f};
  for (const std::vector<std::uint64_t>& shape :
       {std::vector<std::uint64_t>{2, 3}, std::vector<std::uint64_t>{6}}) {
    write_npy(dir / "y.npy", shape, data);
    const NpyArray a = read_npy(dir / "y.npy");
    EXPECT_EQ(a.shape, shape);
    EXPECT_EQ(a.data, data);
    EXPECT_EQ((test::read_bytes(dir / "y.npy").size() - data.size() * 4) % 64, 0u);
  }
}

TEST(Npy, FailedWriteLeavesTheOldFile) {
  TempDir dir;
  std::filesystem::create_directory(dir / "sub");
  test::write_bytes(dir / "sub" / "keep", "x");
  // Renaming a file over a non-empty directory fails: the directory stays, no temp is left.
  EXPECT_THROW(write_npy(dir / "sub", std::vector<std::uint64_t>{1}, std::vector<float>{1.0f}),
               std::runtime_error);
  EXPECT_TRUE(std::filesystem::is_directory(dir / "sub"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);
  EXPECT_THROW(write_npy(dir / "missing_dir" / "y.npy", std::vector<std::uint64_t>{1},
                         std::vector<float>{1.0f}),
               std::runtime_error);
}

TEST(Npy, RefusesMalformedFiles) {
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  const std::string data = floats({1, 2, 3, 4});
  expect_error("", "truncated");
  expect_error("\x93NUMPY\x01", "truncated");
  expect_error("NOTNPY" + npy_bytes(1, dict, data).substr(6), "magic");
  std::string v4 = npy_bytes(1, dict, data);
  v4[6] = 4;
  expect_error(v4, "version 4.0");
  std::string long_header = npy_bytes(1, dict, data);
  long_header[8] = '\xff';
  long_header[9] = '\xff';
  expect_error(long_header, "past the end");
  expect_error(npy_bytes(1, dict, data.substr(0, 12)), "holds 12");
  expect_error(npy_bytes(1, dict, data + "xxxx"), "holds 20");
  expect_error(npy_bytes(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", data),
               "'<f8'");
  expect_error(npy_bytes(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }", data),
               "'>f4'");
  expect_error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", data),
               "Fortran");
  expect_error(npy_bytes(1, "{'descr': '<f4', 'shape': (2, 2), }", data), "needs the keys");
  expect_error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 2)}", data),
               "True or False");
  expect_error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x)}", data),
               "dimension");
  expect_error(npy_bytes(1, "not a dict", data), "expected '{'");
  expect_error(npy_bytes(1, dict + " trailing", data), "after the closing");
  expect_error(npy_bytes(1,
                         "{'descr': '<f4', 'fortran_order': False, 'shape': "
                         "(99999999999999999999,)}",
                         data),
               "overflows");
  expect_error(npy_bytes(1,
                         "{'descr': '<f4', 'fortran_order': False, 'shape': "
                         "(4294967296, 4294967296)}",
                         data),
               "overflows");
}

TEST(Npy, MissingFileNamesThePath) {
  try {
    read_npy("/nonexistent/x.npy");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.npy"), std::string::npos);
  }
}

}  // namespace
}  // namespace kvscope
