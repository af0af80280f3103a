// Terminal and line-based progress.
#include "harness/core/progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace sb {

std::string format_duration(double s) {
  if (s < 60) return fmt::format("{:.1f}s", s);
  long t = static_cast<long>(s + 0.5);
  if (t < 3600) return fmt::format("{}m{:02d}s", t / 60, static_cast<int>(t % 60));
  return fmt::format("{}h{:02d}m{:02d}s", t / 3600, static_cast<int>((t / 60) % 60),
                     static_cast<int>(t % 60));
}

namespace {
using Clock = std::chrono::steady_clock;

class NullProgress final : public Progress {
 public:
  void begin(const std::string&, long) override {}
  void step(long, const std::string&) override {}
  void end() override {}
};

class ConsoleProgress final : public Progress {
 public:
  ConsoleProgress(std::FILE* out, double period_s)
      : out_(out), tty_(isatty(fileno(out)) != 0), period_s_(period_s) {}

  void begin(const std::string& what, long total) override {
    what_ = what;
    total_ = total;
    done_ = 0;
    drawn_ = -1;
    start_ = last_ = Clock::now();
    open_ = true;
    if (!tty_) {
      std::fprintf(out_, "%s: started, %ld total\n", what_.c_str(), total_);
      std::fflush(out_);
    }
  }

  void step(long done, const std::string& detail) override {
    done_ = done;
    detail_ = detail;
    const auto now = Clock::now();
    const double since = std::chrono::duration<double>(now - last_).count();
    // A terminal is redrawn at most 10 times a second; a log gets a line per period.
    if ((tty_ && since < 0.1 && done < total_) || (!tty_ && since < period_s_ && done < total_))
      return;
    last_ = now;
    draw();
  }

  void set_eta(double seconds) override { eta_s_ = seconds; }

  void end() override {
    if (!open_) return;
    if (drawn_ != done_) draw();
    if (tty_) std::fputc('\n', out_);
    std::fflush(out_);
    open_ = false;
  }

 private:
  void draw() {
    drawn_ = done_;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    std::string eta = "?";
    if (eta_s_ >= 0)
      eta = format_duration(eta_s_);
    else if (done_ > 0 && total_ > 0)
      eta = format_duration(elapsed / static_cast<double>(done_) * (total_ - done_));
    std::string line = fmt::format("{}: {}/{} elapsed {} ETA {}", what_, done_, total_,
                                   format_duration(elapsed), eta);
    if (!detail_.empty()) line += "  " + detail_;
    if (tty_)
      std::fprintf(out_, "\r\033[K%s", line.c_str());
    else
      std::fprintf(out_, "%s\n", line.c_str());
    std::fflush(out_);
  }

  std::FILE* out_;
  bool tty_;
  double period_s_;
  std::string what_, detail_;
  long total_ = 0, done_ = 0, drawn_ = -1;
  Clock::time_point start_, last_;
  bool open_ = false;
  double eta_s_ = -1;
};

class StatusFileProgress final : public Progress {
 public:
  StatusFileProgress(std::unique_ptr<Progress> inner, std::string path, double period_s)
      : inner_(std::move(inner)), path_(std::move(path)), period_s_(period_s) {}

  void begin(const std::string& what, long total) override {
    inner_->begin(what, total);
    what_ = what;
    total_ = total;
    done_ = 0;
    start_ = Clock::now();
    write();
  }
  void step(long done, const std::string& detail) override {
    inner_->step(done, detail);
    done_ = done;
    if (std::chrono::duration<double>(Clock::now() - last_).count() >= period_s_) write();
  }
  void end() override {
    inner_->end();
    write();
  }
  void set_eta(double s) override { inner_->set_eta(s); }

 private:
  // Best effort: a status file must never stop a run (the disk may be full).
  void write() {
    last_ = Clock::now();
    const double elapsed = std::chrono::duration<double>(last_ - start_).count();
    const double eta = done_ > 0 && total_ > 0 ? elapsed / double(done_) * double(total_ - done_) : -1;
    const std::string tmp = fmt::format("{}.tmp.{}", path_, getpid());
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) return;
    std::fprintf(f, "%s\n", nlohmann::json{{"what", what_}, {"done", done_}, {"total", total_},
                                            {"elapsed_s", elapsed}, {"eta_s", eta},
                                            {"updated", std::time(nullptr)}}
                               .dump().c_str());
    const bool ok = std::fclose(f) == 0;
    if (!ok || std::rename(tmp.c_str(), path_.c_str()) != 0) std::remove(tmp.c_str());
  }

  std::unique_ptr<Progress> inner_;
  std::string path_, what_;
  double period_s_;
  long total_ = 0, done_ = 0;
  Clock::time_point start_, last_;
};
}  // namespace

std::unique_ptr<Progress> with_status_file(std::unique_ptr<Progress> inner,
                                           const std::string& path, double period_s) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  return std::make_unique<StatusFileProgress>(std::move(inner), path, period_s);
}

std::unique_ptr<Progress> make_progress(bool draw, std::FILE* out, double period_s) {
  if (!draw) return std::make_unique<NullProgress>();
  return std::make_unique<ConsoleProgress>(out, period_s);
}

}  // namespace sb
