# Sourced by the harness's shell tests (tests/harness/*.sh, `source "$(dirname "$0")/preamble.sh"`):
# strict mode, the shardbench binary given as $1 made absolute (the tests cd away), a scratch
# folder $d removed on exit, and fail().
set -euo pipefail
sb=$(realpath "$1")
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
