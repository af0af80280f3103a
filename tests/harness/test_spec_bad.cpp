// Table-driven: every tests/harness/data/bad/NAME.toml must fail with exactly the text in
// NAME.expected ("{file}" stands for the path), every diagnostic in file order.
// To add a case: write NAME.toml, run with SB_WRITE_EXPECTED=1 to create NAME.expected,
// then READ it: it is the contract.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "harness/spec/suite.h"
#include "tests/harness/test_spec_registry.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

std::vector<fs::path> bad_suites() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(SB_TEST_DATA) / "bad"))
    if (e.path().extension() == ".toml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

class BadSuite : public ::testing::TestWithParam<fs::path> {};

TEST_P(BadSuite, FailsWithExactlyTheExpectedDiagnostics) {
  const fs::path toml = GetParam();
  fs::path expected_file = toml;
  expected_file.replace_extension(".expected");
  std::string actual;
  try {
    load_suite(toml.string());
    FAIL() << toml << " loaded without error";
  } catch (const SuiteError& e) {
    actual = replace_all(e.what(), toml.string(), "{file}") + "\n";
    // what() and the list agree: one line per diagnostic.
    EXPECT_EQ(std::count(actual.begin(), actual.end(), '\n'), long(e.diagnostics.size()));
  }
  if (std::getenv("SB_WRITE_EXPECTED")) std::ofstream(expected_file) << actual;
  ASSERT_TRUE(fs::exists(expected_file)) << "missing " << expected_file << "; actual:\n" << actual;
  EXPECT_EQ(actual, read(expected_file));
}

INSTANTIATE_TEST_SUITE_P(Data, BadSuite, ::testing::ValuesIn(bad_suites()),
                         [](const ::testing::TestParamInfo<fs::path>& info) {
                           return info.param.stem().string();
                         });

TEST(BadSuite, TheTableIsNotEmpty) { EXPECT_GE(bad_suites().size(), 15u); }

TEST(BadSuite, MissingFile) {
  try {
    load_suite("/nonexistent/suite.toml");
    FAIL();
  } catch (const SuiteError& e) {
    EXPECT_EQ(std::string(e.what()),
              "/nonexistent/suite.toml: cannot read the suite file (No such file or "
              "directory); check the path");
  }
}

}  // namespace
}  // namespace sb
