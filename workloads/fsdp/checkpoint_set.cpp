// Checkpoint sets on disk: durable writes, the commit marker, and choosing the set to load.
#include "workloads/fsdp/checkpoint_set.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <fmt/ranges.h>  // fmt::join

#include <fcntl.h>
#include <unistd.h>

#include "harness/core/check.h"
#include "harness/core/heartbeat.h"

namespace sb::fsdp::ckpt {
namespace fs = std::filesystem;
namespace {

constexpr const char* kMarkerTitle = "shardbench FSDP checkpoint set, format 2";
constexpr const char* kSetPrefix = "step-";

// Best effort: a directory's entries (a rename) reach the disk. Some file systems refuse
// fsync on a directory (EINVAL); the rename is then as durable as they make it.
void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// The step of a set directory's name "step-<digits>", or -1.
std::int64_t step_of(const std::string& name) {
  if (name.rfind(kSetPrefix, 0) != 0 || name.size() == std::strlen(kSetPrefix)) return -1;
  std::int64_t v = 0;
  for (std::size_t i = std::strlen(kSetPrefix); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || v > (INT64_MAX - 9) / 10) return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

// step -> set directory, for every step-* directory of dir (none when dir does not exist).
std::map<std::int64_t, std::string> list_sets(const std::string& dir) {
  std::map<std::int64_t, std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::int64_t s = step_of(e.path().filename().string());
    if (s >= 0 && e.is_directory()) out[s] = e.path().string();
  }
  return out;
}

}  // namespace

std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::string set_dir(const std::string& dir, std::int64_t step) {
  return fmt::format("{}/{}{:08d}", dir, kSetPrefix, step);
}
std::string rank_file(const std::string& set_dir, int rank) {
  return fmt::format("{}/rank{}.sbck", set_dir, rank);
}
std::string marker_file(const std::string& set_dir) { return set_dir + "/COMMIT"; }

void write_durably(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  SB_CHECK(fd >= 0, "cannot create {}: {}; check that the checkpoint directory is writable",
           tmp, std::strerror(errno));
  std::size_t done = 0;
  int err = 0;
  // In pieces of 64 MiB, each a heartbeat tick: a slow disk shows as progress, not as a
  // stalled rank (harness/core/watchdog.h), however large the file.
  constexpr std::size_t kPiece = std::size_t{64} << 20;
  while (done < bytes.size() && err == 0) {
    const ssize_t n = ::write(fd, bytes.data() + done, std::min(kPiece, bytes.size() - done));
    if (n < 0 && errno != EINTR) err = errno;
    if (n > 0) done += static_cast<std::size_t>(n);
    sb::heartbeat::tick();
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    SB_FAIL("writing {} failed after {} of {} bytes: {}; free space or choose another "
            "checkpoint_dir", path, done, bytes.size(), std::strerror(err));
  }
  fsync_dir(fs::path(path).parent_path().string());
}

std::uint64_t write_durably_streamed(const std::string& path, std::size_t head_bytes,
                                     const std::function<std::size_t(char*, std::size_t)>& next,
                                     const std::function<std::string()>& head) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  SB_CHECK(fd >= 0, "cannot create {}: {}; check that the checkpoint directory is writable",
           tmp, std::strerror(errno));
  std::uint64_t pos = head_bytes;
  int err = 0;
  const auto put = [&](const char* p, std::size_t n, std::uint64_t at) {
    std::size_t done = 0;
    while (done < n && err == 0) {
      const ssize_t k = ::pwrite(fd, p + done, n - done, static_cast<off_t>(at + done));
      if (k < 0 && errno != EINTR) err = errno;
      if (k == 0) err = ENOSPC;  // nothing written and no error: never loop on it
      if (k > 0) done += static_cast<std::size_t>(k);
    }
  };
  std::string why;  // an error of next() or head(), after the file is closed and removed
  try {
    const auto buf = std::shared_ptr<char>(static_cast<char*>(std::aligned_alloc(4096, kStreamPiece)), std::free);
    SB_CHECK(buf != nullptr, "cannot allocate the {}-byte buffer to write {}", kStreamPiece, path);
    for (std::size_t n; err == 0 && (n = next(buf.get(), kStreamPiece)) > 0; pos += n) {
      put(buf.get(), n, pos);
      // Written back and dropped now: a file larger than memory must not become page cache
      // (under a memory cgroup the cache is charged to the run).
      // A write-back error is reported here once (a later fsync would not see it again).
      if (err == 0) {
        if (::sync_file_range(fd, static_cast<off_t>(pos), static_cast<off_t>(n),
                              SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                  SYNC_FILE_RANGE_WAIT_AFTER) == 0)
          ::posix_fadvise(fd, static_cast<off_t>(pos), static_cast<off_t>(n), POSIX_FADV_DONTNEED);
        else if (errno != EINVAL && errno != ENOSYS && errno != ESPIPE)  // not refused as unsupported
          err = errno;
      }
      sb::heartbeat::tick();
    }
    const std::string h = head();
    SB_CHECK(h.size() == head_bytes, "checkpoint header of {} bytes, {} reserved", h.size(), head_bytes);
    if (err == 0) put(h.data(), h.size(), 0);
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (why.empty() && err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (why.empty() && err == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (!why.empty() || err != 0) {
    ::unlink(tmp.c_str());
    SB_CHECK(why.empty(), "writing {}: {}", path, why);
    SB_FAIL("writing {} failed after {} bytes: {}; free space or choose another checkpoint_dir",
            path, pos, std::strerror(err));
  }
  fsync_dir(fs::path(path).parent_path().string());
  return pos;
}

std::string encode_marker(const Marker& m) {
  std::string s = fmt::format("{}\nstep {}\nworld {}\ngroup {}\nstrategy {}\ndtype {}\n"
                              "compression {}\n", kMarkerTitle, m.step, m.world, m.group,
                              m.strategy, m.dtype, m.compression);
  for (std::size_t r = 0; r < m.files.size(); ++r)
    s += fmt::format("rank{} {:016x} {}\n", r, m.files[r].checksum, m.files[r].bytes);
  return s + fmt::format("checksum {:016x}\n", fnv1a(s.data(), s.size()));
}

Marker read_marker(const std::string& set_dir) {
  const std::string path = marker_file(set_dir);
  std::ifstream f(path, std::ios::binary);
  SB_CHECK(f.good(), "{} has no commit marker ({}): its save was interrupted before every rank's "
           "file was written; delete {} and resume from an older complete set, or rerun from "
           "the start", set_dir, path, set_dir);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto cut = text.rfind("checksum ");
  unsigned long long sum = 0;
  const bool sum_ok = cut != std::string::npos &&
                      std::sscanf(text.c_str() + cut, "checksum %llx", &sum) == 1 &&
                      sum == fnv1a(text.data(), cut);
  SB_CHECK(sum_ok && text.rfind(kMarkerTitle, 0) == 0, "commit marker {} is corrupt (not a "
           "shardbench checkpoint marker, or its checksum does not match); the set cannot be "
           "trusted: delete {} and rerun from the start", path, set_dir);
  Marker m;
  std::istringstream in(text.substr(0, cut));
  std::string line;
  std::getline(in, line);  // title
  while (std::getline(in, line)) {
    const auto sp = line.find(' ');
    const std::string key = line.substr(0, sp), val = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (key == "step") m.step = std::stoll(val);
    else if (key == "world") m.world = std::stoi(val);
    else if (key == "group") m.group = std::stoi(val);
    else if (key == "strategy") m.strategy = val;
    else if (key == "dtype") m.dtype = val;
    else if (key == "compression") m.compression = val;
    else if (key.rfind("rank", 0) == 0) {
      FileEntry e;
      unsigned long long sum = 0, bytes = 0;
      SB_CHECK(std::sscanf(val.c_str(), "%llx %llu", &sum, &bytes) == 2 &&
                   key == fmt::format("rank{}", m.files.size()),
               "commit marker {}: bad line \"{}\"", path, line);
      e.checksum = sum;
      e.bytes = bytes;
      m.files.push_back(e);
    }
  }
  SB_CHECK(m.world >= 1 && static_cast<int>(m.files.size()) == m.world, "commit marker {} lists "
           "{} rank files for world size {}; delete {} and rerun from the start", path,
           m.files.size(), m.world, set_dir);
  return m;
}

void prepare_set(const std::string& dir, std::int64_t step) {
  const std::string s = set_dir(dir, step);
  std::error_code ec;
  fs::create_directories(s, ec);
  SB_CHECK(fs::is_directory(s), "cannot create checkpoint directory {}: {}; check "
           "checkpoint_dir", s, ec.message());
  if (fs::exists(marker_file(s))) {
    SB_CHECK(::unlink(marker_file(s).c_str()) == 0, "cannot remove the old commit marker {} "
             "before saving step {} again: {}", marker_file(s), step, std::strerror(errno));
    fsync_dir(s);
  }
  fsync_dir(dir);
}

std::string remove_other_sets(const std::string& dir, std::int64_t keep_step) {
  std::string warning;
  for (const auto& [step, path] : list_sets(dir)) {
    if (step == keep_step) continue;
    std::error_code ec;
    fs::remove_all(path, ec);
    if (ec) warning += fmt::format("could not remove the older checkpoint set {}: {}; ", path,
                                   ec.message());
  }
  fsync_dir(dir);
  return warning;
}

Chosen choose_set(const std::string& dir) {
  SB_CHECK(fs::is_directory(dir), "no checkpoint directory {} (checkpoint_dir); run once with "
           "resume = false to write one", dir);
  const auto sets = list_sets(dir);
  Chosen c;
  std::vector<std::string> interrupted;
  for (auto it = sets.rbegin(); it != sets.rend() && c.step < 0; ++it) {
    if (fs::exists(marker_file(it->second))) {
      c.set_dir = it->second;
      c.step = it->first;
    } else {
      interrupted.push_back(it->second);
    }
  }
  if (c.step >= 0 && !interrupted.empty())
    c.warning = fmt::format("{} {} no commit marker (a save interrupted); using the newest "
                            "complete set, {} (step {})", fmt::join(interrupted, ", "),
                            interrupted.size() == 1 ? "has" : "have", c.set_dir, c.step);
  if (c.step >= 0) return c;
  if (!interrupted.empty())
    SB_FAIL("no complete checkpoint in {}: {} {} no commit marker (COMMIT), so its save was "
            "interrupted before every rank's file was written; rerun from the start (resume = "
            "false)", dir, fmt::join(interrupted, ", "), interrupted.size() == 1 ? "has" : "have");
  SB_CHECK(!fs::exists(dir + "/rank0.sbck"), "{} holds a checkpoint of the old layout "
           "(rank<r>.sbck without a commit marker), which cannot show that it is complete; this "
           "build reads step-<N>/ sets with a COMMIT marker: rerun from the start to write one",
           dir);
  SB_FAIL("no checkpoint in {} (no step-<N> set); run once with resume = false to write one",
          dir);
}

std::int64_t committed_step(const std::string& dir) {
  const auto sets = list_sets(dir);
  for (auto it = sets.rbegin(); it != sets.rend(); ++it)
    if (fs::exists(marker_file(it->second))) return it->first;
  return -1;
}

}  // namespace sb::fsdp::ckpt
