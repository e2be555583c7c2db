#include "base/mapped_file.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

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

// Released pages leave the process's resident memory and read back from the file unchanged.
TEST(MappedFileTest, ReleasedPagesReadBackUnchanged) {
  std::string path = TempPath("release");
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE)), num_pages = 512, size = num_pages * page;
  std::string contents(size, '\0');
  for (size_t i = 0; i < size; ++i) contents[i] = static_cast<char>(i * 31 % 251);
  std::ofstream(path, std::ios::binary) << contents;
  StatusOr<MappedFile> file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok());
  auto resident_pages = [] {
    std::ifstream statm("/proc/self/statm");
    long total = 0, resident = 0;
    statm >> total >> resident;
    return resident;
  };
  uint64_t sum = 0;
  for (size_t i = 0; i < size; i += page) sum += file->data()[i];  // every page mapped in
  const long before = resident_pages();
  // Pages 1..num_pages-2 wholly inside; the partial pages at either end stay.
  file->ReleasePages(file->data() + 100, size - 200);
  const long after = resident_pages();
  EXPECT_GE(before - after, static_cast<long>(num_pages) - 50) << sum;
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(file->data()), size), contents);
  file->ReleasePages(file->data() + size - 10, 100);  // past the end: nothing
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
