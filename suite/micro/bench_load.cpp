// Loading a checkpoint folder against reading its bytes (the Realdata issue's target: loading
// gpt2 124M within 2x of reading its bytes from the page cache), printed, never asserted.
// Writes a gpt2 (124M) Hugging Face folder (seeded weights) unless --dir names one, warms the
// page cache, then interleaves, round by round: reading model.safetensors into memory (the
// baseline) and data::load_checkpoint (headers, names, shapes, every tensor as fp32 in our
// layout, Conv1D transposed).
//   build/micro/micro_bench_load [--dir FOLDER] [--model gpt2] [--rounds 5]   (SB_THREADS)
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "suite/micro/bench_util.h"
#include "workloads/data/safetensors.h"
#include "workloads/models/model.h"
#include "workloads/models/params.h"

namespace {

using sb::bench::arg;
using sb::bench::now_s;

// The file's bytes into a newly allocated tensor: what any loader must at least do (the same
// CPU allocator as the loader's tensors, so both pay, or both skip, the first touch of memory).
double read_bytes(const std::string& path, std::int64_t bytes) {
  const double t0 = now_s();
  auto buf = torch::empty({bytes}, torch::kUInt8);
  std::ifstream f(path, std::ios::binary);
  f.read(static_cast<char*>(buf.data_ptr()), static_cast<std::streamsize>(bytes));
  if (!f) std::fprintf(stderr, "short read of %s\n", path.c_str()), std::exit(1);
  return now_s() - t0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const char* te = std::getenv("SB_THREADS");
  at::set_num_threads(te ? std::atoi(te) : 2);
  const std::string preset = arg(argc, argv, "--model", "gpt2");
  std::string dir = arg(argc, argv, "--dir", "");
  const int rounds = std::atoi(arg(argc, argv, "--rounds", "5").c_str());
  auto model = sb::models::make_model(dir.empty() ? preset : dir);
  if (dir.empty()) {
    dir = (std::filesystem::temp_directory_path() / ("sb_bench_load_" + preset)).string();
    if (!std::filesystem::exists(dir + "/config.json"))
      sb::data::export_hf_folder(*model, sb::models::init_params(model->units(), 1), dir);
  }
  const std::string file = dir + "/model.safetensors";
  const auto bytes = static_cast<std::int64_t>(std::filesystem::file_size(file));
  read_bytes(file, bytes);  // into the page cache
  sb::data::load_checkpoint(*model, dir);
  std::vector<double> raw, load;
  for (int r = 0; r < rounds; ++r) {
    raw.push_back(read_bytes(file, bytes));
    const double t0 = now_s();
    auto w = sb::data::load_checkpoint(*model, dir);
    load.push_back(now_s() - t0);
  }
  const double mb = static_cast<double>(bytes) / 1e6, r = median(raw), l = median(load);
  std::printf("# %s: %s, %.1f MB, %d rounds interleaved (medians)\n", model->config().preset.c_str(),
              file.c_str(), mb, rounds);
  std::printf("read the bytes       %8.3f s  %8.0f MB/s\n", r, mb / r);
  std::printf("load_checkpoint      %8.3f s  %8.0f MB/s\n", l, mb / l);
  std::printf("# load / read %.2fx (target <= 2: %s)\n", l / r, l / r <= 2 ? "PASS" : "MISS");
  return 0;
}
