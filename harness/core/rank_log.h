// Per-rank log files (torchrun's convention: one file per rank). The launcher interleaves every
// rank's output into the point's log; a rank's own file holds only what that rank printed.
// Both stdout and stderr keep going where they went (the launcher's forwarding), and are
// copied to the file by a `tee` child: it outlives a rank that is killed or aborted, so the
// last lines before a crash reach the file too.
#pragma once
#include <string>

namespace sb {

// Copies this process's stdout and stderr, from now on, to `path` (appended; the folder is
// created). Best effort: on any failure it prints a warning and changes nothing.
void tee_output_to(const std::string& path);

}  // namespace sb
