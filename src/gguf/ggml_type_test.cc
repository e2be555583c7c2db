#include "gguf/ggml_type.h"

#include <gtest/gtest.h>

namespace tachyon {
namespace {

TEST(GgmlTypeTest, BlockLayoutsMatchGgml) {
  struct Expected {
    GgmlType type;
    int64_t block_size, type_size;
  };
  // Sizes of ggml's block structs (ggml-common.h), QK_K = 256.
  for (Expected e : std::initializer_list<Expected>{
           {GgmlType::kF32, 1, 4},       {GgmlType::kF16, 1, 2},       {GgmlType::kBF16, 1, 2},
           {GgmlType::kQ4_0, 32, 18},    {GgmlType::kQ4_1, 32, 20},    {GgmlType::kQ5_0, 32, 22},
           {GgmlType::kQ5_1, 32, 24},    {GgmlType::kQ8_0, 32, 34},    {GgmlType::kQ8_1, 32, 36},
           {GgmlType::kQ2_K, 256, 84},   {GgmlType::kQ3_K, 256, 110},  {GgmlType::kQ4_K, 256, 144},
           {GgmlType::kQ5_K, 256, 176},  {GgmlType::kQ6_K, 256, 210},  {GgmlType::kQ8_K, 256, 292},
           {GgmlType::kIQ2_XXS, 256, 66}, {GgmlType::kIQ2_XS, 256, 74}, {GgmlType::kIQ3_XXS, 256, 98},
           {GgmlType::kIQ1_S, 256, 50},  {GgmlType::kIQ4_NL, 32, 18},  {GgmlType::kIQ3_S, 256, 110},
           {GgmlType::kIQ2_S, 256, 82},  {GgmlType::kIQ4_XS, 256, 136}, {GgmlType::kI8, 1, 1},
           {GgmlType::kI16, 1, 2},       {GgmlType::kI32, 1, 4},       {GgmlType::kI64, 1, 8},
           {GgmlType::kF64, 1, 8},       {GgmlType::kIQ1_M, 256, 56},  {GgmlType::kTQ1_0, 256, 54},
           {GgmlType::kTQ2_0, 256, 66},  {GgmlType::kMXFP4, 32, 17}}) {
    const GgmlTypeTraits& t = GetGgmlTypeTraits(e.type);
    EXPECT_EQ(t.block_size, e.block_size) << t.name;
    EXPECT_EQ(t.type_size, e.type_size) << t.name;
  }
}

TEST(GgmlTypeTest, RemovedAndUnknownIdsHaveNoTraits) {
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u}) {
    EXPECT_EQ(FindGgmlTypeTraits(id), nullptr) << id;
    EXPECT_FALSE(DescribeUnknownGgmlType(id).empty());
  }
  EXPECT_NE(DescribeUnknownGgmlType(4).find("removed"), std::string::npos);
  EXPECT_NE(DescribeUnknownGgmlType(77).find("unknown ggml type id 77"), std::string::npos);
}

TEST(GgmlTypeTest, ParseNamesCaseInsensitive) {
  EXPECT_EQ(*ParseGgmlType("q4_0"), GgmlType::kQ4_0);
  EXPECT_EQ(*ParseGgmlType("Q6_K"), GgmlType::kQ6_K);
  EXPECT_EQ(*ParseGgmlType("bf16"), GgmlType::kBF16);
  StatusOr<GgmlType> bad = ParseGgmlType("q3_x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown tensor type 'q3_x'"), std::string::npos);
}

TEST(GgmlTypeTest, RowBytesRequiresWholeBlocks) {
  EXPECT_EQ(GgmlRowBytes(GgmlType::kQ8_0, 64), 68u);
  EXPECT_EQ(GgmlRowBytes(GgmlType::kQ4_K, 512), 288u);
  EXPECT_EQ(GgmlRowBytes(GgmlType::kF16, 3), 6u);
  EXPECT_FALSE(GgmlRowBytes(GgmlType::kQ4_0, 48).has_value());
}

}  // namespace
}  // namespace tachyon
