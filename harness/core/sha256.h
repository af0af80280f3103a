// SHA-256 (FIPS 180-4) for point ids and suite-file hashes; small and dependency-free so
// ids are the same on every machine without OpenSSL.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace sb {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t n);
  void update(const std::string& s) { update(s.data(), s.size()); }
  std::string hex();  // finishes the hash: 64 lowercase hex digits

 private:
  void block(const std::uint8_t* p);  // one 64-byte block
  std::uint32_t h_[8];
  std::uint8_t buf_[64];
  std::size_t buf_len_ = 0;
  std::uint64_t total_ = 0;  // bytes hashed so far
};

std::string sha256_hex(const std::string& bytes);

}  // namespace sb
