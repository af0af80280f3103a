// The micro task's Python twin (OMB-Py, Alachiotis et al.: the OSU micro-benchmarks over
// mpi4py): micro.impl = "mpi4py-numpy" or "mpi4py-torch" runs the same collective and point-
// to-point benchmarks in Python (workloads/micro/omb_py.py, .venv's interpreter with mpi4py
// built against this Open MPI) on NumPy arrays or torch tensors. `shardbench run` execs it on
// every rank (TaskInfo::exec); the sizes, iterations and warm-up come from here, so both
// sides run exactly the same cases; rank 0 hands the timings back to `shardbench run
// --measured`, which records them as the in-process path does (record_python_twin): the same
// tables, columns and bytes. docs/METRICS.md "Python's overhead (OMB-Py)".
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "harness/workload.h"

namespace sb::micro {

struct MicroConfig;

// (name, description) of the Python implementations.
const std::vector<std::pair<std::string, std::string>>& python_impls();
bool is_python(const std::string& impl);

// TaskInfo::exec and TaskInfo::record_measured of the micro task.
std::vector<std::string> python_twin_argv(const Point& p, const TaskInfo::Exec& x);
void record_python_twin(const Point& p, const std::string& file, Recorder& rec);

}  // namespace sb::micro
