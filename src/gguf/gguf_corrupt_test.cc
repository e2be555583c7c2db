// Truncated, corrupt and hostile files: each gets its own specific error,
// never a crash, an out-of-bounds read or an allocation by an unchecked count.
#include <unistd.h>

#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "gguf/gguf_test_util.h"

namespace tachyon {
namespace {

using testing_util::ByteBuilder;

constexpr uint32_t kTypeF32 = 0, kTypeQ8_0 = 8;
constexpr uint32_t kString = 8, kArray = 9, kUint32 = 4, kBool = 7;

// A valid file: 1 string key, 2 F32 tensors of 8 floats each.
ByteBuilder ValidFile() {
  ByteBuilder b;
  b.Header(2, 1).Str("general.architecture").U32(kString).Str("llama");
  b.Tensor("a", {8}, kTypeF32, 0).Tensor("b", {8}, kTypeF32, 32);
  b.PadTo(32);
  for (int i = 0; i < 16; ++i) b.F32(static_cast<float>(i));
  return b;
}

Status ParseStatus(ByteBuilder& b) {
  return GgufFile::Parse(b.bytes().data(), b.size()).status();
}

void ExpectError(ByteBuilder b, StatusCode code, const std::string& fragment) {
  Status status = ParseStatus(b);
  ASSERT_FALSE(status.ok()) << "expected an error containing: " << fragment;
  EXPECT_EQ(status.code(), code) << status.ToString();
  EXPECT_NE(status.message().find(fragment), std::string::npos)
      << "message '" << status.message() << "' lacks '" << fragment << "'";
}

TEST(GgufCorruptTest, ValidBaseFileParses) {
  ByteBuilder b = ValidFile();
  StatusOr<GgufFile> file = GgufFile::Parse(b.bytes().data(), b.size());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const float* data = reinterpret_cast<const float*>(file->FindTensor("b")->data);
  EXPECT_EQ(data[0], 8.0f);
}

TEST(GgufCorruptTest, EveryTruncationIsAnError) {
  ByteBuilder full = ValidFile();
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> prefix(full.bytes().begin(), full.bytes().begin() + n);
    StatusOr<GgufFile> file = GgufFile::Parse(prefix.data(), prefix.size());
    EXPECT_FALSE(file.ok()) << "prefix of " << n << " bytes parsed";
    if (!file.ok()) {
      EXPECT_EQ(file.status().code(), StatusCode::kDataLoss) << n;
    }
  }
}

TEST(GgufCorruptTest, HeaderErrors) {
  ExpectError(ByteBuilder(), StatusCode::kDataLoss, "file is empty");
  ByteBuilder bad_magic;
  bad_magic.Raw("GGML", 4).U32(3).U64(0).U64(0);
  ExpectError(bad_magic, StatusCode::kDataLoss, "not a GGUF file");
  ByteBuilder v1;
  v1.Header(0, 0, 1);
  ExpectError(v1, StatusCode::kUnimplemented, "GGUF version 1 is not supported");
  ByteBuilder v9;
  v9.Header(0, 0, 9);
  ExpectError(v9, StatusCode::kUnimplemented, "unknown GGUF version 9");
  ByteBuilder big_endian;
  big_endian.Header(0, 0, 0x03000000);
  ExpectError(big_endian, StatusCode::kUnimplemented, "big-endian");
  ByteBuilder short_header;
  short_header.Raw("GGUF", 4).U32(3).U32(0);
  ExpectError(short_header, StatusCode::kDataLoss, "tensor count needs 8 bytes at byte 8");
}

TEST(GgufCorruptTest, HugeCountsAreRejectedBeforeAllocation) {
  ByteBuilder kv;
  kv.Header(0, 1ull << 60);
  ExpectError(kv, StatusCode::kDataLoss, "metadata entries");
  ByteBuilder tensors;
  tensors.Header(~0ull, 0);
  ExpectError(tensors, StatusCode::kDataLoss, "tensors, more than");
  ByteBuilder array;
  array.Header(0, 1).Str("tokenizer.ggml.tokens").U32(kArray).U32(kString).U64(1ull << 62);
  ExpectError(array, StatusCode::kDataLoss, "array of 4611686018427387904 string values cannot fit");
  ByteBuilder array_u64;
  array_u64.Header(0, 1).Str("x").U32(kArray).U32(10).U64(~0ull);
  ExpectError(array_u64, StatusCode::kDataLoss, "cannot fit");
}

TEST(GgufCorruptTest, StringsPastTheEnd) {
  ByteBuilder key;
  key.Header(0, 1).U64(1000).Raw("abcdefghijklmnopqrstuvwxyz", 26);
  ExpectError(key, StatusCode::kDataLoss, "metadata entry 0 key: string of 1000 bytes runs past");
  ByteBuilder value;
  value.Header(0, 1).Str("general.name").U32(kString).U64(~0ull);
  ExpectError(value, StatusCode::kDataLoss, "('general.name'): string of");
  ByteBuilder element;
  element.Header(0, 1).Str("tok").U32(kArray).U32(kString).U64(2).Str("ok").U64(99);
  ExpectError(element, StatusCode::kDataLoss, "('tok')[1]: string of 99 bytes runs past");
}

TEST(GgufCorruptTest, BadValues) {
  ByteBuilder type;
  type.Header(0, 1).Str("k").U32(13).U32(0);
  ExpectError(type, StatusCode::kDataLoss, "unknown value type id 13");
  ByteBuilder boolean;
  boolean.Header(0, 1).Str("k").U32(kBool).U8(2);
  ExpectError(boolean, StatusCode::kDataLoss, "bool has byte value 2");
  ByteBuilder dup;
  dup.Header(0, 2).Str("k").U32(kUint32).U32(1).Str("k").U32(kUint32).U32(2);
  ExpectError(dup, StatusCode::kDataLoss, "duplicate key");
  ByteBuilder empty_key;
  empty_key.Header(0, 1).Str("").U32(kUint32).U32(1);
  ExpectError(empty_key, StatusCode::kDataLoss, "empty key");
  ByteBuilder deep;
  deep.Header(0, 1).Str("deep").U32(kArray);
  for (int i = 0; i < 10; ++i) deep.U32(kArray).U64(1);
  deep.U32(kUint32).U64(0);
  ExpectError(deep, StatusCode::kDataLoss, "nested deeper than 8");
  ByteBuilder alignment;
  alignment.Header(0, 1).Str("general.alignment").U32(kUint32).U32(24);
  ExpectError(alignment, StatusCode::kDataLoss, "general.alignment = 24 is not a power of two");
  ByteBuilder alignment_type;
  alignment_type.Header(0, 1).Str("general.alignment").U32(kString).Str("32");
  ExpectError(alignment_type, StatusCode::kDataLoss, "general.alignment has type string");
}

TEST(GgufCorruptTest, BadTensorInfos) {
  auto one_tensor = [](const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                       uint64_t offset, size_t data_bytes) {
    ByteBuilder b;
    b.Header(1, 0).Tensor(name, dims, type, offset).PadTo(32);
    for (size_t i = 0; i < data_bytes; ++i) b.U8(1);
    return b;
  };
  ExpectError(one_tensor("t", {8}, 4, 0, 64), StatusCode::kDataLoss, "(Q4_2) was removed");
  ExpectError(one_tensor("t", {8}, 99, 0, 64), StatusCode::kDataLoss, "unknown ggml type id 99");
  ExpectError(one_tensor("t", {1, 1, 1, 1, 1}, kTypeF32, 0, 64), StatusCode::kDataLoss,
              "5 dimensions");
  ExpectError(one_tensor("t", {}, kTypeF32, 0, 64), StatusCode::kDataLoss, "0 dimensions");
  ExpectError(one_tensor("t", {48}, kTypeQ8_0, 0, 64), StatusCode::kDataLoss,
              "row length 48 is not a multiple of the Q8_0 block size 32");
  ExpectError(one_tensor("t", {8}, kTypeF32, 4, 64), StatusCode::kDataLoss,
              "data offset 4 is not a multiple of the alignment 32");
  ExpectError(one_tensor("t", {8}, kTypeF32, 0, 31), StatusCode::kDataLoss,
              "tensor 't': data [0, +32) runs past the end of the data section (31 bytes)");
  ExpectError(one_tensor("t", {8}, kTypeF32, 1ull << 63, 64), StatusCode::kDataLoss, "runs past");
  ExpectError(one_tensor("t", {1ull << 40, 1ull << 40}, kTypeF32, 0, 64), StatusCode::kDataLoss,
              "element count overflows");
  ExpectError(one_tensor("t", {~0ull}, kTypeF32, 0, 64), StatusCode::kDataLoss, "out of range");
  ExpectError(one_tensor(std::string(65, 'x'), {8}, kTypeF32, 0, 64), StatusCode::kDataLoss,
              "over the limit of 64 bytes");
  ExpectError(one_tensor("", {8}, kTypeF32, 0, 64), StatusCode::kDataLoss, "empty name");

  ByteBuilder overlap;
  overlap.Header(2, 0).Tensor("a", {16}, kTypeF32, 0).Tensor("b", {8}, kTypeF32, 32).PadTo(32);
  for (int i = 0; i < 32; ++i) overlap.F32(0);
  ExpectError(overlap, StatusCode::kDataLoss, "tensors 'a' and 'b' overlap");

  ByteBuilder dup;
  dup.Header(2, 0).Tensor("a", {8}, kTypeF32, 0).Tensor("a", {8}, kTypeF32, 32).PadTo(32);
  for (int i = 0; i < 16; ++i) dup.F32(0);
  ExpectError(dup, StatusCode::kDataLoss, "duplicate tensor name");
}

TEST(GgufCorruptTest, ErrorsFromOpenNameThePath) {
  std::string path = ::testing::TempDir() + "/corrupt_open_" + std::to_string(::getpid()) + ".gguf";
  {
    std::ofstream out(path, std::ios::binary);
    out << "GGUF\x03";
  }
  StatusOr<GgufFile> file = GgufFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().message().rfind(path + ": file is truncated", 0), 0u)
      << file.status().message();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tachyon
