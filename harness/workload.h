// The narrow interface between the harness and the workloads (train, infer, micro).
// Workloads register themselves, their config keys and their names at static-init time;
// the harness validates, expands, launches and records without knowing what a model is.
#pragma once
#include <atomic>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>

#include "harness/core/progress.h"
#include "harness/core/stop_flag.h"
#include "harness/spec/point.h"

namespace sb {

class Recorder;

// ---- Config schema -------------------------------------------------------------------
enum class KeyType { Bool, Int, Float, String, Name };  // Name: one of a registered name set

struct KeySpec {
  std::string key;       // e.g. "batch", "lr", "compress.param.block"
  KeyType type;
  Value default_value;
  std::string name_set;  // for KeyType::Name: which set ("model", "strategy", ...)
  std::string doc;       // one line, shown by `shardbench keys`
  // The values a suite may give, checked where the file sets them and before any narrowing
  // (readers narrow Int keys to int, so the default range is an int's): Int keys lie in
  // [min_int, max_int]; Float keys are finite and lie in [min_float, max_float]. The default
  // value must lie in the range.
  std::int64_t min_int = std::numeric_limits<std::int32_t>::min();
  std::int64_t max_int = std::numeric_limits<std::int32_t>::max();
  double min_float = std::numeric_limits<double>::lowest();
  double max_float = std::numeric_limits<double>::max();
  // The tasks that read the key; empty = every task. A point of another task that sets the
  // key to anything but its default is refused (the value would be silently ignored).
  std::vector<std::string> tasks;
  // A Name key that also takes a path (any value with a '/', e.g. a local model folder): the
  // name check passes it and the workloads' validators check what it names.
  bool accepts_path = false;
  // The key names a file or folder the point writes (export_folder, pruning.export_folder):
  // an input check asks point_writing() whether an earlier point of the suite makes what a
  // point reads, before it warns that the input does not exist (yet).
  bool writes_path = false;
  std::string unit;  // of Int and Float keys ("tokens", "s", "bytes"); shown by `shardbench keys`
};
void register_key(KeySpec spec);
const std::vector<KeySpec>& registered_keys();
const KeySpec* find_key(const std::string& key);

// Named variants (models, strategies, compressors, ...): the known names of each set,
// so that an unknown name is an error listing the known ones.
void register_name(const std::string& set, const std::string& name, const std::string& doc);
std::vector<std::pair<std::string, std::string>> registered_names(const std::string& set);
std::vector<std::string> registered_name_sets();  // sorted, for `shardbench keys`

// Cross-key validation: a workload says which combinations are impossible.
struct Diagnostic {
  std::string key;      // the key to blame (its source position is reported)
  std::string message;  // what is wrong and how to fix it
  // A warning does not stop the suite (e.g. an input file that an earlier suite may still
  // create); `shardbench plan` prints it and exits 0.
  bool warning = false;
};
using Validator = std::function<void(const Point&, std::vector<Diagnostic>&)>;
void register_validator(Validator v);
const std::vector<Validator>& registered_validators();

// A rule that needs the suite's other points (an input an earlier point writes): called for
// each point with every point of the suite, in run order, and the position of the one to check.
using SuiteValidator =
    std::function<void(const std::vector<Point>&, std::size_t, std::vector<Diagnostic>&)>;
void register_suite_validator(SuiteValidator v);
const std::vector<SuiteValidator>& registered_suite_validators();

// The first of `points` whose writes_path key names `path`: its position and the key.
// Paths compare after lexical normalisation ("./a//b/" and "a/b" are one folder).
struct PathWriter {
  std::size_t position = 0;
  std::string key;
};
std::optional<PathWriter> point_writing(const std::vector<Point>& points, const std::string& path);
// Derived keys, filled in before a point's id is computed, so that equal configurations get one
// id however they were written (the mesh's sizes from world, an alias into its key). The
// harness's own (the mesh, harness/spec/mesh_config.h) run first, then the workloads' in
// registration order. A canonicalizer only fills in; what is wrong is a validator's to say.
using Canonicalizer = std::function<void(Point&)>;
void register_canonicalizer(Canonicalizer c);
void canonicalize(Point& p);

// ---- Running a point -----------------------------------------------------------------

// Thrown by a workload after stop_agreed() returned true, where it cannot simply return
// (e.g. from inside a load-generator callback). Every rank throws it at the same point, so
// `shardbench run` finishes the point as stopped (partial trace) without aborting.
struct Stopped : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RunContext {
  const Point& point;
  MPI_Comm world;      // all ranks of this point
  int rank = 0, size = 1;
  Recorder& recorder;  // rank-local; the harness gathers and writes from rank 0
  Progress& progress;  // rank 0 draws it
  const StopFlag& stop;

  // Collective over world (call it at the same place on every rank): whether any rank's
  // stop flag is set. The one way a workload decides to stop early.
  bool stop_agreed() const;
};

class Workload {
 public:
  virtual ~Workload() = default;
  // Runs the point on this rank. Throws sb::Error on failure (the harness records it).
  virtual void run(RunContext& ctx) = 0;
};

struct TaskInfo {
  std::string task;  // value of the "task" key: "train", "infer", "micro"
  std::function<std::unique_ptr<Workload>()> make;
  // Model-state bytes per rank for `shardbench plan` (documented in docs/METRICS.md).
  std::function<double(const Point&)> model_state_bytes_per_rank;
  // The terms of the task's memory model per rank, (term, bytes) in the task's order, for
  // `shardbench plan --memory` (docs/METRICS.md "Memory model"); empty: none.
  std::function<std::vector<std::pair<std::string, double>>(const Point&)> memory_terms_per_rank;
  // The keys that lower a rank's memory, each with how ("raise it: smaller micro-batches"):
  // what an out-of-memory failure tells the user to change (harness/launch/out_of_memory.h).
  std::vector<std::pair<std::string, std::string>> memory_keys;
  // The folder a rerun of the point continues from (its checkpoints), or "" when a rerun
  // starts again at step 0: what a Slurm requeue after the pre-timeout signal asks
  // (harness/launch/slurm_timeout.h). Unset: the task never resumes.
  std::function<std::string(const Point&)> resume_dir;
  // A point whose ranks are another program (the micro task's Python twin, OMB-Py style):
  // its argv, or empty to run in this process. `shardbench run` execs it on every rank before
  // MPI_Init, so the program joins the launcher's job as that rank (the same mpirun or srun,
  // job scripts and logs); it hands its measurements back to `shardbench run --measured FILE`
  // (no MPI), which writes the point's result file through record_measured: one writer of the
  // schema for both. Unset: every point runs in process.
  struct Exec {
    std::string suite_file, point, results_dir;  // as `run` was given them
    std::string self;        // this shardbench binary
    std::string source_dir;  // the checkout it was built from (scripts, .venv)
  };
  std::function<std::vector<std::string>(const Point&, const Exec&)> exec;
  // The measurements file's records into rec (rank 0's recorder, every rank's rows); throws
  // when the file does not describe this point.
  std::function<void(const Point&, const std::string& file, Recorder&)> record_measured;
};
void register_task(TaskInfo info);
const TaskInfo* find_task(const std::string& task);

// Static registration helper: `static sb::Registrar reg([]{ ... register_* ... });`
struct Registrar {
  explicit Registrar(const std::function<void()>& f) { f(); }
};

}  // namespace sb
