// The safetensors reader: values of F32, F16 and BF16 tensors, and one clear error naming
// the file and tensor for every malformed file.
#include "engine/model/safetensors.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "support/model_files.hpp"

namespace kvscope {
namespace {

using test::raw_safetensors;
using test::TempDir;
using test::write_bytes;

// Expects `body` to throw std::runtime_error whose message contains every one of `parts`.
template <class F>
void expect_error(F body, std::initializer_list<std::string> parts) {
  try {
    body();
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    for (const std::string& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << p << "\"";
    }
  }
}

std::vector<std::uint64_t> dims(std::initializer_list<std::uint64_t> d) { return d; }

TEST(Safetensors, ReadsF32F16Bf16Values) {
  TempDir dir;
  std::vector<float> values = {1.0f, -2.5f, 0.15625f, 3.0f, -0.0078125f, 65504.0f};
  std::map<std::string, test::TestTensor> tensors;
  for (const char* dtype : {"F32", "F16", "BF16"}) {
    std::vector<float> v = values;
    if (std::string(dtype) == "BF16") v[5] = 65536.0f;  // exact in bf16
    tensors[std::string("t_") + dtype] = {dtype, {2, 3}, test::encode(v, dtype)};
  }
  write_bytes(dir / "a.safetensors", test::safetensors_bytes(tensors));
  SafetensorsFile file(dir / "a.safetensors");
  EXPECT_EQ(file.read_f32("t_F32", dims({2, 3})), values);
  EXPECT_EQ(file.read_f32("t_F16", dims({2, 3})), values);
  std::vector<float> bf = values;
  bf[5] = 65536.0f;
  EXPECT_EQ(file.read_f32("t_BF16", dims({2, 3})), bf);
  EXPECT_EQ(file.entry("t_F16").element_bytes, 2u);
}

TEST(Safetensors, EmptyTensorsRead) {
  TempDir dir;
  std::map<std::string, test::TestTensor> tensors;
  tensors["f32"] = {"F32", {0}, ""};  // a libFuzzer find: memcpy from a null buffer
  tensors["bf16"] = {"BF16", {3, 0}, ""};
  write_bytes(dir / "e.safetensors", test::safetensors_bytes(tensors));
  SafetensorsFile file(dir / "e.safetensors");
  EXPECT_TRUE(file.read_f32("f32", dims({0})).empty());
  EXPECT_TRUE(file.read_f32("bf16", dims({3, 0})).empty());
}

TEST(Safetensors, OddHeaderLengthReadsUnalignedData) {
  TempDir dir;
  const std::string header =
      R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";  // 55 bytes: data unaligned
  std::string data(8, '\0');
  const float v[2] = {1.5f, -4.0f};
  std::memcpy(data.data(), v, 8);
  write_bytes(dir / "u.safetensors", raw_safetensors(header.size(), header, data));
  EXPECT_EQ(SafetensorsFile(dir / "u.safetensors").read_f32("x", dims({2})),
            (std::vector<float>{1.5f, -4.0f}));
}

TEST(Safetensors, EmptyAndTruncatedFiles) {
  TempDir dir;
  write_bytes(dir / "empty.safetensors", "");
  expect_error([&] { SafetensorsFile f(dir / "empty.safetensors"); },
               {"empty.safetensors", "truncated"});
  write_bytes(dir / "short.safetensors", "abc");
  expect_error([&] { SafetensorsFile f(dir / "short.safetensors"); },
               {"short.safetensors", "truncated"});
  expect_error([&] { SafetensorsFile f(dir / "missing.safetensors"); },
               {"missing.safetensors", "cannot open"});
}

TEST(Safetensors, HeaderLengthPastTheEnd) {
  TempDir dir;
  write_bytes(dir / "a.safetensors", raw_safetensors(1000, "{}"));
  expect_error([&] { SafetensorsFile f(dir / "a.safetensors"); },
               {"a.safetensors", "header length 1000", "past the end"});
  write_bytes(dir / "b.safetensors", raw_safetensors(~0ull, "{}"));
  expect_error([&] { SafetensorsFile f(dir / "b.safetensors"); },
               {"b.safetensors", "past the end"});
}

TEST(Safetensors, HeaderNotJson) {
  TempDir dir;
  for (const std::string header : {"{not json", "[1, 2]", "\"text\"", ""}) {
    write_bytes(dir / "a.safetensors", raw_safetensors(header.size(), header));
    expect_error([&] { SafetensorsFile f(dir / "a.safetensors"); }, {"a.safetensors", "JSON"});
  }
}

TEST(Safetensors, BadEntriesNameTheTensor) {
  TempDir dir;
  struct Case {
    std::string entry, expected;
  };
  const Case cases[] = {
      {R"({"dtype":"F33","shape":[1],"data_offsets":[0,4]})", "unknown dtype \"F33\""},
      {R"({"shape":[1],"data_offsets":[0,4]})", "dtype"},
      {R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})", "shape"},
      {R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})", "shape"},
      {R"({"dtype":"F32","data_offsets":[0,4]})", "shape"},
      {R"({"dtype":"F32","shape":[1],"data_offsets":[0,400]})", "extend past the 8 bytes"},
      {R"({"dtype":"F32","shape":[1],"data_offsets":[4,0]})", "end before begin"},
      {R"({"dtype":"F32","shape":[1],"data_offsets":[0,8]})", "needs 4"},
      {R"({"dtype":"F32","shape":[1],"data_offsets":[0]})", "data_offsets"},
      {R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})", "overflows"},
      {R"("F32")", "not a JSON object"},
  };
  for (const Case& c : cases) {
    const std::string header = R"({"model.w":)" + c.entry + "}";
    write_bytes(dir / "a.safetensors", raw_safetensors(header.size(), header, std::string(8, 'x')));
    expect_error([&] { SafetensorsFile f(dir / "a.safetensors"); },
                 {"a.safetensors", "tensor 'model.w'", c.expected});
  }
}

TEST(Safetensors, MissingTensorWrongShapeAndUnsupportedDtype) {
  TempDir dir;
  std::map<std::string, test::TestTensor> tensors;
  tensors["ints"] = {"I64", {1}, std::string(8, '\0')};
  tensors["w"] = {"F32", {2, 2}, test::encode({1, 2, 3, 4}, "F32")};
  write_bytes(dir / "a.safetensors", test::safetensors_bytes(tensors));
  SafetensorsFile file(dir / "a.safetensors");
  expect_error([&] { file.read_f32("absent", dims({1})); },
               {"a.safetensors", "'absent'", "not found"});
  expect_error([&] { file.read_f32("w", dims({4})); }, {"a.safetensors", "'w'", "[2, 2]", "[4]"});
  expect_error([&] { file.read_f32("ints", dims({1})); }, {"a.safetensors", "'ints'", "I64"});
}

TEST(Safetensors, MetadataMustBeAnObject) {
  TempDir dir;
  const std::string header = R"({"__metadata__":[1]})";
  write_bytes(dir / "a.safetensors", raw_safetensors(header.size(), header));
  expect_error([&] { SafetensorsFile f(dir / "a.safetensors"); },
               {"a.safetensors", "__metadata__"});
}

}  // namespace
}  // namespace kvscope
