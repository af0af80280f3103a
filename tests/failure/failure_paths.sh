#!/usr/bin/env bash
# One failure path (docs/ARCHITECTURE.md, "Failures"): a throw in the middle of backward on one
# rank, a throw inside a collective's completion, SIGKILL of one rank during a step, and
# SIGKILL of one rank between two Gloo collectives (comm_backend = "gloo": the others are
# inside the next one when it dies), at 2 and 4 ranks under each communication progress mode
# (thread, poll, inline); SIGKILL of the last pipeline stage's rank in the middle of a pipelined
# step's backward (pp-kill: mesh.pp = 2, 1f1b over 4 micro-batches; the first stage is waiting
# for its gradient); and SIGKILL of one rank in the middle of sharded serving (task =
# "serve": rank 0's scheduler and the followers). For each: every
# rank is gone within 10 s of the fault, the point is recorded failed with the fault's
# message, and the sweep goes on to the next point. Prints the seconds it measured.
# The stall watchdog (harness/core/watchdog.h), with stall_timeout = 5: SIGSTOP of rank 1 at
# a step's start (stall-stop: its process stops, heartbeats and all), and rank 0 stuck there
# with its process alive (stall-hang: it beats but makes no progress while the others wait in
# the step's first collective). Every rank is gone within stall_timeout + 5 s of the fault,
# and the failed result names the stalled rank, its host, phase and step.
# Usage: failure_paths.sh SHARDBENCH WORKDIR [FAULT...]
#   (FAULT: backward | collective | kill | gloo-kill | pp-kill | serve-kill | stall-stop | stall-hang)
set -euo pipefail
exe=$1
work=$2
shift 2
faults=("$@")
((${#faults[@]})) || faults=(backward collective kill)
rm -rf "$work"
mkdir -p "$work"

shopt -s extglob  # gloo-kill's expectation has alternatives
suite() {  # suite FILE EXTRA-BASE-LINE
if [ "$fault" = serve-kill ]; then serve_suite "$1"; return; fi
cat >"$1" <<TOML
[suite]
name = "failure"
[base]
$2
task = "train"
model = "gpt2-tiny"
strategy = "full_shard"
batch = 8
seq = 32
steps = 6
warmup = 1
# Far beyond the seconds asserted: a hang shows as a slow point, not a pass. The stall faults
# have 60 s: six points held to it still end within the sweep's timeout below.
time_limit = $tlimit
[axes]
world = [2, 4]
comm_progress = ["thread", "poll", "inline"]
TOML
}

serve_suite() {  # 2 points: a sharded gpt2-tiny server at 2 and 4 ranks
cat >"$1" <<TOML
[suite]
name = "failure-serve"
[base]
task = "serve"
model = "gpt2-tiny"
strategy = "full_shard"
serve_policy = "continuous"
arrival = "offline"
requests = 64
batch = 8
prompt_len_min = 8
prompt_len_max = 32
output_len_min = 8
output_len_max = 32
time_limit = 300
[axes]
world = [2, 4]
TOML
}

fails=0
stall=5  # stall_timeout of the stall-* faults, seconds
check() {  # check CONDITION-RESULT MESSAGE
  if [ "$1" != 0 ]; then echo "FAIL: $2"; fails=$((fails + 1)); fi
}

for fault in "${faults[@]}"; do
  limit=10  # seconds from the fault until every rank is gone
  tlimit=300
  case $fault in
    backward) spec="backward:1:2:throw"; expect="rank 1 on*injected fault ?SB_FAULT? at backward" ;;
    collective) spec="collective:1:2:throw"; expect="rank 1 on*injected fault ?SB_FAULT? at collective" ;;
    kill) spec="step:1:2:kill"; expect="process rank 1 with PID*exited on signal 9 (Killed)" ;;
    # Recorded is whichever comes first: mpirun's report of the kill, or a survivor's Gloo
    # error (its peer's sockets closed).
    gloo-kill) spec="collective:1:2:kill"; extra='comm_backend = "gloo"'
      expect='@(process rank 1 with PID*exited on signal 9 ?Killed?|*gloo * failed*)' ;;
    pp-kill) spec="backward:1:2:kill"; extra=$'"mesh.pp" = 2\nmicrobatches = 4'
      expect="process rank 1 with PID*exited on signal 9 (Killed)" ;;
    serve-kill) spec="step:1:3:kill"; expect="process rank 1 with PID*exited on signal 9 (Killed)" ;;
    # A short timeout, taken as given (the automatic one is at least 60 s).
    stall-stop) spec="step:1:2:stop"; extra="stall_timeout = $stall"; limit=$((stall + 5)); tlimit=60
      expect="stall watchdog: rank 1 on * stalled: no heartbeat for * s (stall_timeout $stall s)*Its last heartbeat: step *, phase *The others: * in *?param_all_gather, *group? on mpi ?for *" ;;
    stall-hang) spec="step:0:2:hang"; extra="stall_timeout = $stall"; limit=$((stall + 5)); tlimit=60
      expect="stall watchdog: rank 0 on * stalled: alive but no progress for * s outside any collective (stall_timeout $stall s)*Its last heartbeat: step 2, phase step start, not in a collective*The others: * in *?param_all_gather, *group? on mpi ?for *" ;;
    *) echo "unknown fault $fault"; exit 2 ;;
  esac
  res="$work/$fault"
  suite "$work/$fault.toml" "${extra:-}"
  extra=
  echo "== fault $fault (SB_FAULT=$spec)"
  set +e
  # Bounded apart from the points' time limits: a sweep that hangs fails here, with its output.
  SB_FAULT=$spec timeout -k 10 540 "$exe" sweep "$work/$fault.toml" --results "$res" \
    --allow-oversubscribe >"$work/$fault.out" 2>&1
  rc=$?
  set -e
  cat "$work/$fault.out"
  check $((rc == 1 ? 0 : 1)) "$fault: sweep exit code $rc, expected 1 (points failed, sweep finished)"
  points=6
  [ "$fault" = serve-kill ] && points=2
  grep -q "$points ran, 0 skipped, $points failed" "$work/$fault.out"
  check $? "$fault: the sweep did not run all $points points to a failure"
  for log in "$res"/logs/*.log; do
    point=$(basename "$log" .log)
    t_fault=$(sed -n 's/.*shardbench fault: .* unix time \([0-9.]*\)$/\1/p' "$log" | head -1)
    t_end=$(sed -n 's/.*launcher ended: .* unix time \([0-9.]*\)$/\1/p' "$log" | tail -1)
    if [ -z "$t_fault" ] || [ -z "$t_end" ]; then
      check 1 "$fault $point: no fault or end line in $log"
      continue
    fi
    gone=$(awk -v a="$t_fault" -v b="$t_end" 'BEGIN { printf "%.2f", b - a }')
    reason=$(/usr/bin/python3 -c 'import h5py, sys
with h5py.File(sys.argv[1], "r") as f:
    print(f.attrs["status"], "|", str(f.attrs["failure_reason"]).replace("\n", " "))' \
      "$res/points/$point.h5")
    echo "  $fault $point: all ranks gone ${gone} s after the fault; ${reason:0:160}"
    awk -v g="$gone" -v l="$limit" 'BEGIN { exit !(g < l) }'
    check $? "$fault $point: ranks took ${gone} s to go (limit $limit s)"
    case $reason in
      "failed |"*$expect*) ;;  # unquoted: kill's expectation is a pattern
      *) check 1 "$fault $point: expected failed with '$expect', got: $reason" ;;
    esac
  done
done
echo "failure paths: $fails failed checks"
[ "$fails" = 0 ]
