// Write -> read round trips: every metadata type, arrays (nested, empty, strings),
// tensors of several types, and alignment other than the default.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

#include "gguf/gguf_file.h"
#include "gguf/gguf_test_util.h"
#include "gguf/gguf_writer.h"

namespace tachyon {
namespace {

// ctest runs test cases as parallel processes: the pid keeps their files apart.
std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + std::to_string(::getpid()) + "_" + name;
}

std::vector<std::pair<std::string, GgufValue>> EveryMetadataType() {
  return {
      {"t.u8", GgufValue(uint8_t{200})},
      {"t.i8", GgufValue(int8_t{-100})},
      {"t.u16", GgufValue(uint16_t{65000})},
      {"t.i16", GgufValue(int16_t{-32000})},
      {"t.u32", GgufValue(uint32_t{4000000000u})},
      {"t.i32", GgufValue(int32_t{-2000000000})},
      {"t.f32", GgufValue(1.5e-5f)},
      {"t.bool_true", GgufValue(true)},
      {"t.bool_false", GgufValue(false)},
      {"t.string", GgufValue("llama")},
      {"t.string_empty", GgufValue("")},
      {"t.string_binary", GgufValue(std::string("a\0b\xff\xfe", 5))},
      {"t.string_utf8", GgufValue("héllo 世界 🦙")},
      {"t.u64", GgufValue(std::numeric_limits<uint64_t>::max())},
      {"t.i64", GgufValue(std::numeric_limits<int64_t>::min())},
      {"t.f64", GgufValue(3.141592653589793)},
      {"t.arr_u8", GgufValue(GgufArray(std::vector<uint8_t>{0, 1, 255}))},
      {"t.arr_i8", GgufValue(GgufArray(std::vector<int8_t>{-128, 0, 127}))},
      {"t.arr_u16", GgufValue(GgufArray(std::vector<uint16_t>{1, 65535}))},
      {"t.arr_i16", GgufValue(GgufArray(std::vector<int16_t>{-1, 2}))},
      {"t.arr_u32", GgufValue(GgufArray(std::vector<uint32_t>{7, 8, 9}))},
      {"t.arr_i32", GgufValue(GgufArray(std::vector<int32_t>{1, 2, 3, 6}))},
      {"t.arr_f32", GgufValue(GgufArray(std::vector<float>{-0.5f, 0.0f, 1e30f}))},
      {"t.arr_bool", GgufValue(GgufArray(std::vector<bool>{true, false, true}))},
      {"t.arr_string", GgufValue(GgufArray(std::vector<std::string>{"<s>", "", "▁the"}))},
      {"t.arr_u64", GgufValue(GgufArray(std::vector<uint64_t>{1ull << 40}))},
      {"t.arr_i64", GgufValue(GgufArray(std::vector<int64_t>{-(1ll << 40)}))},
      {"t.arr_f64", GgufValue(GgufArray(std::vector<double>{1e-300, 2.5}))},
      {"t.arr_empty_string", GgufValue(GgufArray::Empty(GgufValueType::kString))},
      {"t.arr_nested",
       GgufValue(GgufArray(std::vector<GgufArray>{
           GgufArray(std::vector<std::string>{"a", "b"}), GgufArray(std::vector<int32_t>{}),
           GgufArray(std::vector<GgufArray>{GgufArray(std::vector<float>{1.0f})})}))},
  };
}

TEST(GgufRoundTripTest, EveryMetadataTypeSurvives) {
  std::string path = TempPath("roundtrip_metadata.gguf");
  GgufWriter writer;
  auto entries = EveryMetadataType();
  for (const auto& [key, value] : entries) writer.SetMetadata(key, value);
  ASSERT_TRUE(writer.Open(path).ok());
  ASSERT_TRUE(writer.Close().ok());

  StatusOr<GgufFile> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->version(), 3u);
  EXPECT_TRUE(file->tensors().empty());
  ASSERT_EQ(file->metadata().size(), entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(file->metadata()[i].key, entries[i].first) << "file order is kept";
    const GgufValue* value = file->Find(entries[i].first);
    ASSERT_NE(value, nullptr) << entries[i].first;
    EXPECT_EQ(value->type(), entries[i].second.type()) << entries[i].first;
    EXPECT_TRUE(*value == entries[i].second) << entries[i].first << " = " << value->ToDisplayString();
  }
  EXPECT_EQ(file->Find("t.arr_empty_string")->AsArray()->element_type(), GgufValueType::kString);
  EXPECT_EQ(*file->GetString("t.string_utf8"), "héllo 世界 🦙");
  EXPECT_EQ(*file->GetUint("t.u16"), 65000u);
  EXPECT_FLOAT_EQ(static_cast<float>(*file->GetFloat("t.f32")), 1.5e-5f);
  std::remove(path.c_str());
}

TEST(GgufRoundTripTest, TypedGettersExplainErrors) {
  std::string path = TempPath("roundtrip_getters.gguf");
  GgufWriter writer;
  writer.SetMetadata("general.architecture", "llama");
  writer.SetMetadata("llama.block_count", GgufValue(uint32_t{16}));
  writer.SetMetadata("neg", GgufValue(int32_t{-4}));
  ASSERT_TRUE(writer.Open(path).ok());
  ASSERT_TRUE(writer.Close().ok());
  StatusOr<GgufFile> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*file->GetUint("llama.block_count"), 16u);
  EXPECT_EQ(file->GetUint("llama.missing").status().message(),
            "metadata key 'llama.missing' is missing");
  EXPECT_EQ(file->GetUint("general.architecture").status().message(),
            "metadata key 'general.architecture' is a string, expected an unsigned integer");
  EXPECT_FALSE(file->GetUint("neg").ok());
  EXPECT_FALSE(file->GetArray("general.architecture").ok());
  std::remove(path.c_str());
}

void RoundTripTensors(uint32_t alignment) {
  std::string path = TempPath("roundtrip_tensors_" + std::to_string(alignment) + ".gguf");
  GgufWriter writer(alignment);
  writer.SetMetadata("general.architecture", "llama");
  struct Spec {
    std::string name;
    GgmlType type;
    std::vector<int64_t> shape;
  };
  std::vector<Spec> specs = {
      {"a.f32", GgmlType::kF32, {3}},
      {"b.f16", GgmlType::kF16, {5, 3}},
      {"c.q8_0", GgmlType::kQ8_0, {64, 2}},
      {"d.q4_k", GgmlType::kQ4_K, {256, 1, 2}},
      {"e.bf16", GgmlType::kBF16, {2, 2, 2, 2}},
      {"f.q4_0", GgmlType::kQ4_0, {32}},
  };
  std::vector<std::vector<uint8_t>> payloads;
  for (const Spec& s : specs) ASSERT_TRUE(writer.AddTensor(s.name, s.type, s.shape).ok());
  ASSERT_TRUE(writer.Open(path).ok());
  for (size_t i = 0; i < specs.size(); ++i) {
    std::vector<uint8_t> payload(writer.tensors()[i].num_bytes);
    std::iota(payload.begin(), payload.end(), static_cast<uint8_t>(17 * i + 1));
    // Write in two pieces to exercise streaming.
    size_t half = payload.size() / 2;
    ASSERT_TRUE(writer.WriteTensorData(payload.data(), half).ok());
    ASSERT_TRUE(writer.WriteTensorData(payload.data() + half, payload.size() - half).ok());
    payloads.push_back(std::move(payload));
  }
  ASSERT_TRUE(writer.Close().ok());

  StatusOr<GgufFile> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->alignment(), alignment);
  EXPECT_EQ(file->data_offset() % alignment, 0u);
  ASSERT_EQ(file->tensors().size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const GgufTensorInfo* t = file->FindTensor(specs[i].name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, specs[i].type);
    EXPECT_EQ(t->shape, specs[i].shape);
    EXPECT_EQ(t->offset % alignment, 0u);
    ASSERT_EQ(t->num_bytes, payloads[i].size());
    EXPECT_EQ(std::vector<uint8_t>(t->data, t->data + t->num_bytes), payloads[i]) << t->name;
  }
  EXPECT_EQ(file->FindTensor("d.q4_k")->num_bytes, 2u * 144u);
  EXPECT_EQ(file->FindTensor("b.f16")->ShapeString(), "[5, 3]");
  std::remove(path.c_str());
}

TEST(GgufRoundTripTest, TensorsDefaultAlignment) { RoundTripTensors(32); }
TEST(GgufRoundTripTest, TensorsWideAlignment) { RoundTripTensors(256); }

TEST(GgufWriterTest, RejectsBadTensorsAndShortData) {
  GgufWriter writer;
  EXPECT_FALSE(writer.AddTensor("x", GgmlType::kQ4_0, {48}).ok());
  EXPECT_FALSE(writer.AddTensor(std::string(65, 'n'), GgmlType::kF32, {1}).ok());
  EXPECT_FALSE(writer.AddTensor("x", GgmlType::kF32, {1, 1, 1, 1, 1}).ok());
  ASSERT_TRUE(writer.AddTensor("x", GgmlType::kF32, {4}).ok());
  EXPECT_FALSE(writer.AddTensor("x", GgmlType::kF32, {4}).ok()) << "duplicate";

  std::string path = TempPath("writer_short.gguf");
  ASSERT_TRUE(writer.Open(path).ok());
  float two[2] = {1, 2};
  ASSERT_TRUE(writer.WriteTensorData(two, sizeof(two)).ok());
  Status closed = writer.Close();
  EXPECT_EQ(closed.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(closed.message().find("got 8 of its 16 bytes"), std::string::npos);
  EXPECT_FALSE(GgufFile::Open(path).ok()) << "a failed write leaves no file";
  EXPECT_FALSE(GgufFile::Open(path + ".tmp").ok()) << "nor its temporary";
}

TEST(GgufWriterTest, ReadsVersion2Files) {
  // v2 has the same layout as v3 (64-bit counts); only the version differs.
  testing_util::ByteBuilder b;
  b.Header(0, 1, 2).Str("general.name").U32(8).Str("v2");
  StatusOr<GgufFile> file = GgufFile::Parse(b.bytes().data(), b.size());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->version(), 2u);
  EXPECT_EQ(*file->GetString("general.name"), "v2");
}

}  // namespace
}  // namespace tachyon
