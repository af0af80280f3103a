// The streamed reshard's reader (fsdp/checkpoint_reshard.h FlatReader) over files written here:
// a read across two files' spans gives their elements and zeros past numel; of replicas (a
// no_shard set: every file the whole buffer) reader `spread` reads only file spread mod 3,
// exactly the bytes asked; with at most 2 files open, reading 5 files keeps 2 open and a closed
// one reads again right; an element no file holds is refused naming it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "workloads/fsdp/checkpoint_reshard.h"

using sb::fsdp::ckpt::FlatReader;
using sb::fsdp::ckpt::FlatSources;
using sb::fsdp::ckpt::FlatSpan;

namespace {

struct Files {
  std::filesystem::path dir;
  Files() {
    dir = std::filesystem::temp_directory_path() / ("sb_flat_reader_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
  }
  ~Files() { std::filesystem::remove_all(dir); }
  // `skip` bytes of 0xFF, then elements [begin, end) of the buffer whose element i is i + 0.5.
  std::string write(const std::string& name, std::int64_t begin, std::int64_t end, std::uint64_t skip) {
    const auto path = (dir / name).string();
    std::ofstream f(path, std::ios::binary);
    const std::string pad(skip, '\xff');
    f.write(pad.data(), static_cast<std::streamsize>(pad.size()));
    for (std::int64_t i = begin; i < end; ++i) {
      const float v = static_cast<float>(i) + 0.5f;
      f.write(reinterpret_cast<const char*>(&v), 4);
    }
    return path;
  }
};

std::vector<float> read(FlatReader& r, const FlatSources& s, std::int64_t e0, std::int64_t n) {
  std::vector<float> out(static_cast<std::size_t>(n), -1.0f);
  r.read(s, 1, e0, n, reinterpret_cast<char*>(out.data()), "test unit");
  return out;
}

}  // namespace

TEST(FlatReader, ReadsAcrossSpansAndZerosThePadding) {
  Files f;
  FlatSources s;
  s.numel = 25;
  s.kind[1] = {FlatSpan{f.write("a", 0, 10, 64), 0, 10, 64}, FlatSpan{f.write("b", 10, 25, 128), 10, 25, 128}};
  FlatReader r;
  const auto v = read(r, s, 5, 25);  // elements 5 .. 29: 25 .. 29 are padding
  for (int i = 0; i < 25; ++i) EXPECT_EQ(v[i], i + 5 < 25 ? static_cast<float>(i + 5) + 0.5f : 0.0f) << i;
  EXPECT_EQ(r.bytes_read().at(s.kind[1][0].path), 5u * 4);
  EXPECT_EQ(r.bytes_read().at(s.kind[1][1].path), 15u * 4);
}

TEST(FlatReader, SpreadsReplicasOverTheReaders) {
  Files f;
  FlatSources s;
  s.numel = 100;
  for (int j = 0; j < 3; ++j)
    s.kind[1].push_back(FlatSpan{f.write("r" + std::to_string(j), 0, 100, 256), 0, 100, 256});
  for (int spread : {0, 1, 2, 4}) {
    FlatReader r(spread);
    const auto v = read(r, s, 0, 100);
    for (int i = 0; i < 100; ++i) ASSERT_EQ(v[i], static_cast<float>(i) + 0.5f);
    ASSERT_EQ(r.bytes_read().size(), 1u) << "spread " << spread;
    EXPECT_EQ(r.bytes_read().begin()->first, s.kind[1][spread % 3].path) << "spread " << spread;
    EXPECT_EQ(r.bytes_read().begin()->second, 400u);
  }
  // The span reaching furthest wins: one ending at 100 beats one ending at 50, whatever the
  // spread (no ties here).
  FlatSources mixed;
  mixed.numel = 100;
  mixed.kind[1] = {FlatSpan{f.write("short", 0, 50, 0), 0, 50, 0}, s.kind[1][0]};
  FlatReader r(0);
  read(r, mixed, 0, 100);
  EXPECT_EQ(r.bytes_read().size(), 1u);
  EXPECT_EQ(r.bytes_read().begin()->first, s.kind[1][0].path);
}

TEST(FlatReader, KeepsAtMostMaxOpenFiles) {
  Files f;
  FlatSources s;
  s.numel = 50;
  for (int j = 0; j < 5; ++j)
    s.kind[1].push_back(FlatSpan{f.write("s" + std::to_string(j), 10 * j, 10 * j + 10, 32), 10 * j, 10 * j + 10, 32});
  FlatReader r(0, /*max_open=*/2);
  const auto v = read(r, s, 0, 50);
  for (int i = 0; i < 50; ++i) ASSERT_EQ(v[i], static_cast<float>(i) + 0.5f);
  EXPECT_EQ(r.open_files(), 2u);  // s3 and s4
  EXPECT_EQ(r.opens(), 5u);
  EXPECT_EQ(r.bytes_read().size(), 5u);
  const auto again = read(r, s, 3, 4);  // file s0, closed since: opened again, s3 closed
  for (int i = 0; i < 4; ++i) EXPECT_EQ(again[i], static_cast<float>(i + 3) + 0.5f);
  EXPECT_EQ(r.open_files(), 2u);
  EXPECT_EQ(r.opens(), 6u);
  EXPECT_EQ(r.bytes_read().at(s.kind[1][0].path), 14u * 4);
  read(r, s, 40, 2);  // s4, the more recently read of the two left open: still open
  EXPECT_EQ(r.opens(), 6u);
  read(r, s, 30, 2);  // s3, the least recently read: it was the one closed
  EXPECT_EQ(r.opens(), 7u);
}

TEST(FlatReader, RefusesAnElementNoFileHolds) {
  Files f;
  FlatSources s;
  s.numel = 30;
  s.kind[1] = {FlatSpan{f.write("a", 0, 10, 0), 0, 10, 0}, FlatSpan{f.write("c", 20, 30, 0), 20, 30, 0}};
  FlatReader r;
  try {
    read(r, s, 0, 30);
    FAIL() << "a hole was read";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("test unit: no rank file holds element 10 of its exp_avg (kind 1)"),
              std::string::npos) << e.what();
  }
}
