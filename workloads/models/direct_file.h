// A file that streams bytes past the page cache, so what a run offloads to disk does not come
// back as RAM: O_DIRECT where the file system has it (buffers, sizes and offsets aligned to
// kAlign), else (tmpfs) a plain file whose written pages are dropped after each write. The
// one implementation of the optimizer's offload store (fsdp/offload_store.h), FPDT's key/value
// chunks (attention_fpdt.cpp) and fit's disk measurement (train/train_fit.cpp).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace sb::models {

class DirectFile {
 public:
  static constexpr std::uint64_t kAlign = 4096;
  static std::uint64_t round_up(std::uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
  // A kAlign-aligned buffer of `bytes` (freed with the last copy of the pointer).
  static std::shared_ptr<char> aligned(std::uint64_t bytes);

  // Creates (truncates) path. what: the setting that asked for it, for messages ("kv_offload =
  // \"disk\""); fix: what the user can do when the file cannot be made or written. unlink_now:
  // remove the name at once (the space is freed when the file closes), else at destruction.
  DirectFile(std::string path, std::string what, std::string fix, bool unlink_now);
  ~DirectFile();
  DirectFile(const DirectFile&) = delete;
  DirectFile& operator=(const DirectFile&) = delete;

  // Whole transfers (short ones and EINTR retried); a failure throws naming the file, the
  // offset and the fix.
  void write(const void* p, std::uint64_t bytes, std::uint64_t offset) const;
  void read(void* p, std::uint64_t bytes, std::uint64_t offset) const;
  // Reserves [0, bytes) now, so a full disk fails here and not in the middle of a step.
  void reserve(std::uint64_t bytes) const;
  void sync() const;

  const std::string& path() const { return path_; }
  bool direct() const { return direct_; }

 private:
  void io(bool write, char* p, std::uint64_t bytes, std::uint64_t offset) const;
  std::string path_, what_, fix_;
  int fd_ = -1;
  bool direct_ = true, unlinked_ = false;
};

}  // namespace sb::models
