// A scratch folder of this test process's own: ctest runs each test case as its own process,
// two at a time, and test cases of one file used to write the same paths under TempDir()
// (one truncated another's vocab.txt while it was read). TempDir()/sb-<pid>/ is unique, and
// removed when the process exits.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace sb::test {

struct ScratchDir {
  std::string path;
  ScratchDir() : path(testing::TempDir() + "sb-" + std::to_string(::getpid()) + "/") {
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

inline std::string tmp() {
  static const ScratchDir dir;
  return dir.path;
}

}  // namespace sb::test
