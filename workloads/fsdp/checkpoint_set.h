// A sharded checkpoint on disk is a *set*: one directory per save, dir/step-<N>/, holding one
// file per rank (rank<r>.sbck, checkpoint.cpp) and a commit marker (COMMIT) that rank 0 writes
// last, after every rank's file is durable. The marker names the step, the run's layout and
// every rank file's checksum and size, so a set whose save was interrupted (no marker) or
// whose files come from different saves (a checksum the marker does not list) is never
// loaded. After a commit the older sets are removed; when the newest set has no marker, the
// newest committed one is used (docs/FSDP.md "Checkpoints").
// Pure file handling: no MPI, no LibTorch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sb::fsdp::ckpt {

// FNV-1a, 64 bit: the checksum of rank files and of the marker (continue with h).
std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = 1469598103934665603ull);

struct FileEntry {
  std::uint64_t checksum = 0, bytes = 0;  // the rank file's own checksum field, its size
};

// The commit marker's content. Text ("key value" lines, ending in a checksum line), so a
// person can read which save a directory holds.
struct Marker {
  std::int64_t step = 0;
  int world = 0, group = 0;
  std::string strategy, dtype, compression;
  std::vector<FileEntry> files;  // [rank]
};

std::string set_dir(const std::string& dir, std::int64_t step);  // dir/step-00000042
std::string rank_file(const std::string& set_dir, int rank);     // set_dir/rank3.sbck
std::string marker_file(const std::string& set_dir);             // set_dir/COMMIT

// Writes bytes to path + ".tmp", fsyncs, renames to path and fsyncs the directory: the file
// exists under its final name only complete and durable. Errors name the path and the reason
// ("No space left on device") and remove the temporary file.
void write_durably(const std::string& path, const std::string& bytes);
// write_durably for a file larger than memory should hold: the body comes from next(buf, cap),
// which fills up to cap bytes of a 4096-aligned buffer and returns how many (0: the end), and
// is written after head_bytes reserved bytes; then head(), exactly head_bytes bytes computed
// once the body is written (its checksum), at offset 0. Memory: one buffer of kStreamPiece
// bytes; the written pages leave the page cache as they go. Returns the file's size.
constexpr std::size_t kStreamPiece = std::size_t{64} << 20;
std::uint64_t write_durably_streamed(const std::string& path, std::size_t head_bytes,
                                     const std::function<std::size_t(char*, std::size_t)>& next,
                                     const std::function<std::string()>& head);

std::string encode_marker(const Marker& m);
// Reads and checks set_dir/COMMIT; a missing marker says the save was interrupted.
Marker read_marker(const std::string& set_dir);

// Rank 0, before a save's files are written: creates dir/step-<N>; a set of the same step
// already there (a re-save) first loses its marker, so it is never half old, half new and
// committed.
void prepare_set(const std::string& dir, std::int64_t step);
// Rank 0, after the marker: removes every other step-* set of dir. Problems are returned as
// a warning ("" = none): the new set is committed either way.
std::string remove_other_sets(const std::string& dir, std::int64_t keep_step);

struct Chosen {
  std::string set_dir;
  std::int64_t step = -1;
  std::string warning;  // newer sets without a marker that were passed over ("" = none)
};
// The newest committed set of dir. Throws sb::Error saying what dir holds when there is none
// (nothing, only interrupted saves, or files of the old layout without sets).
Chosen choose_set(const std::string& dir);
// The step of dir's newest committed set, or -1 when it has none (no throw).
std::int64_t committed_step(const std::string& dir);

}  // namespace sb::fsdp::ckpt
