#include "base/mapped_file.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace tachyon {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/mapped_file_test_" + std::to_string(::getpid()) + "_" + name;
}

TEST(MappedFileTest, MapsContents) {
  std::string path = TempPath("contents");
  std::ofstream(path, std::ios::binary) << "hello gguf";
  StatusOr<MappedFile> file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_EQ(file->size(), 10u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(file->data()), file->size()), "hello gguf");
  MappedFile moved = std::move(file).value();
  EXPECT_EQ(moved.size(), 10u);
  std::remove(path.c_str());
}

TEST(MappedFileTest, EmptyFileHasNoData) {
  std::string path = TempPath("empty");
  std::ofstream(path, std::ios::binary).close();
  StatusOr<MappedFile> file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->size(), 0u);
  EXPECT_EQ(file->data(), nullptr);
  std::remove(path.c_str());
}

TEST(MappedFileTest, MissingFileIsNotFound) {
  StatusOr<MappedFile> file = MappedFile::Open(TempPath("does-not-exist"));
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("does-not-exist"), std::string::npos);
}

TEST(MappedFileTest, DirectoryIsRejected) {
  StatusOr<MappedFile> file = MappedFile::Open(::testing::TempDir());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tachyon
