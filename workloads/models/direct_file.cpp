// O_DIRECT files (direct_file.h).
#include "workloads/models/direct_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "harness/core/check.h"

namespace sb::models {

std::shared_ptr<char> DirectFile::aligned(std::uint64_t bytes) {
  void* p = nullptr;
  SB_CHECK(::posix_memalign(&p, kAlign, bytes) == 0, "cannot allocate a {}-byte I/O buffer", bytes);
  return std::shared_ptr<char>(static_cast<char*>(p), std::free);
}

DirectFile::DirectFile(std::string path, std::string what, std::string fix, bool unlink_now)
    : path_(std::move(path)), what_(std::move(what)), fix_(std::move(fix)) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
  if (fd_ < 0 && errno == EINVAL) {  // no O_DIRECT on this file system (tmpfs)
    direct_ = false;
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  }
  SB_REQUIRE(fd_ >= 0, "{}: cannot create {} ({}); {}", what_, path_, std::strerror(errno), fix_);
  if (unlink_now) unlinked_ = ::unlink(path_.c_str()) == 0;
}

DirectFile::~DirectFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!unlinked_) ::unlink(path_.c_str());
}

void DirectFile::io(bool write, char* p, std::uint64_t bytes, std::uint64_t offset) const {
  for (std::uint64_t done = 0; done < bytes;) {
    const ssize_t r = write ? ::pwrite(fd_, p + done, bytes - done, static_cast<off_t>(offset + done))
                            : ::pread(fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    SB_REQUIRE(r > 0, "{}: {} {} bytes at {} of {} failed ({}); {}", what_, write ? "writing" : "reading",
             bytes, offset + done, path_, r < 0 ? std::strerror(errno) : "end of file", fix_);
    done += static_cast<std::uint64_t>(r);
  }
  if (write && !direct_)  // keep the written pages out of the page cache
    ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes), POSIX_FADV_DONTNEED);
}

void DirectFile::write(const void* p, std::uint64_t bytes, std::uint64_t offset) const {
  io(true, static_cast<char*>(const_cast<void*>(p)), bytes, offset);
}
void DirectFile::read(void* p, std::uint64_t bytes, std::uint64_t offset) const {
  io(false, static_cast<char*>(p), bytes, offset);
}

void DirectFile::reserve(std::uint64_t bytes) const {
  if (const int e = ::posix_fallocate(fd_, 0, static_cast<off_t>(bytes)); e != 0)
    SB_USER_FAIL("{}: cannot reserve {} bytes in {} ({}); {}", what_, bytes, path_, std::strerror(e), fix_);
}

void DirectFile::sync() const { ::fsync(fd_); }

}  // namespace sb::models
