#!/usr/bin/env bash
# `shardbench fit` (harness/spec/fit.h): on a fixture of costs the choice of the "auto" keys
# is exactly data/fit/fit.expected (every candidate's predicted peak a rank, step time and
# verdict: the fastest within memory_budget chosen, the others rejected with why), and so is
# the choice of an integer key, seq_chunks (data/fit/fit_chunks.expected), and of where the
# master lives, offload_param (data/fit/fit_param.expected), and of FPDT's chunked blocks
# (data/fit/fit_chunked.expected; inside Ulysses data/fit/fit_chunked_sp.expected); a budget
# nothing meets is refused naming the smallest need; plan refuses "auto" before any costs are
# measured, naming the command; then fit measures this machine's costs, and a sweep of the
# fitted suite runs the chosen point, whose result records the choice (its config) and the
# prediction (reference fit_peak_bytes, fit_step_s) beside the measured peak.
# Usage: fit.sh build/shardbench
source "$(dirname "$0")/preamble.sh"
data=$(cd "$(dirname "$0")" && pwd)/data/fit
export TMPDIR=/tmp  # the disk costs are named by offload_dir's folder
cd "$d"
"$sb" fit "$data/fit.toml" --costs "$data/costs.json" > fit.out 2> fit.err || { cat fit.err; fail "fit"; }
sed -n '/^point /,/^$/p' fit.out | sed "s|$HOME|~|g" > tables.out
diff tables.out "$data/fit.expected" || fail "fit's tables differ from fit.expected (above)"
if "$sb" fit "$data/fit_none.toml" --costs "$data/costs.json" > none.out 2> none.err; then
  fail "fit accepted a budget no candidate meets"
fi
grep -qF 'no combination of the "auto" keys (strategy, activation_checkpoint, offload_optimizer) fits point' none.err ||
  { cat none.err; fail "no-fit message"; }
grep -qF 'the smallest valid one needs' none.err || { cat none.err; fail "no-fit message names no need"; }
# An integer key (seq_chunks) chosen from its candidates; "auto" for an integer key no fit task
# varies is a type error at the key.
"$sb" fit "$data/fit_chunks.toml" --costs "$data/costs.json" > chunks.out 2> chunks.err || { cat chunks.err; fail "fit chunks"; }
sed -n '/^point /,/^$/p' chunks.out | sed "s|$HOME|~|g" > chunks.tables
diff chunks.tables "$data/fit_chunks.expected" || fail "fit's seq_chunks tables differ from fit_chunks.expected (above)"
# Where the master lives (offload_param): in memory when it fits, on disk when only that does.
"$sb" fit "$data/fit_param.toml" --costs "$data/costs.json" > param.out 2> param.err || { cat param.err; fail "fit param"; }
sed -n '/^point /,/^$/p' param.out | sed "s|$HOME|~|g" > param.tables
diff param.tables "$data/fit_param.expected" || fail "fit's offload_param tables differ from fit_param.expected (above)"
# FPDT's chunked blocks: plain training when it fits, 8 chunks with everything on disk when only
# chunked blocks do.
"$sb" fit "$data/fit_chunked.toml" --costs "$data/costs.json" > chunked.out 2> chunked.err || { cat chunked.err; fail "fit chunked"; }
sed -n '/^point /,/^$/p' chunked.out | sed "s|$HOME|~|g" > chunked.tables
diff chunked.tables "$data/fit_chunked.expected" || fail "fit's chunked tables differ from fit_chunked.expected (above)"
# ... and inside Ulysses (mesh.sp = 2): a seq_chunks that does not divide a rank's tokens refused.
"$sb" fit "$data/fit_chunked_sp.toml" --costs "$data/costs.json" > chunked_sp.out 2> chunked_sp.err ||
  { cat chunked_sp.err; fail "fit chunked sp"; }
sed -n '/^point /,/^$/p' chunked_sp.out | sed "s|$HOME|~|g" > chunked_sp.tables
diff chunked_sp.tables "$data/fit_chunked_sp.expected" || fail "fit's chunked sp tables differ from fit_chunked_sp.expected (above)"
sed 's/^batch = .*/batch = "auto"/' "$data/fit_chunks.toml" > batch_auto.toml
if "$sb" plan batch_auto.toml > ba.out 2> ba.err; then fail "plan accepted batch = \"auto\""; fi
grep -qF 'batch_auto.toml:15:9: batch: wrong type: expected an integer, got the string "auto"' ba.err ||
  { cat ba.err; fail "batch = \"auto\" message"; }
# Before any costs: plan names the command that measures them.
if "$sb" plan "$data/fit.toml" > plan.out 2> plan.err; then fail "plan resolved \"auto\" without costs"; fi
grep -qF "strategy = \"auto\" is chosen from this machine's measured costs, and results/fit-fixture/fit-costs.json does not exist yet: run \`shardbench fit $data/fit.toml\` first" plan.err ||
  { cat plan.err; fail "plan's message"; }
# Measured here, then swept: the ranks resolve the same point from the same costs file.
"$sb" fit "$data/fit.toml" > measured.out 2> measured.err || { cat measured.err; fail "fit measuring"; }
for c in "gemm_gflops cpu fp32 t1" copy_gbs "disk_write_gbs /tmp" "disk_read_gbs /tmp"; do
  grep -qF "\"$c\"" results/fit-fixture/fit-costs.json || fail "cost $c not measured"
done
"$sb" plan "$data/fit.toml" > plan2.out 2>&1 || { cat plan2.out; fail "plan after fit"; }
"$sb" sweep "$data/fit.toml" > sweep.log 2>&1 || { cat sweep.log; fail "sweep"; }
/usr/bin/python3 - results/fit-fixture <<'PY'
import glob, json, sys, h5py
files = sorted(glob.glob(f"{sys.argv[1]}/points/*.h5"))
assert len(files) == 2, files
for f in files:
    with h5py.File(f) as h:
        assert h.attrs["status"] == "done", (f, h.attrs["status"])
        cfg, ref = json.loads(h.attrs["config"]), json.loads(h.attrs["reference"])
        assert cfg["strategy"] != "auto" and cfg["activation_checkpoint"] != "auto", cfg
        assert ref["fit_peak_bytes"] > 0 and ref["fit_step_s"] > 0, ref
        measured = int(h["ranks"]["peak_step_tensor_bytes"][0]) + int(h["ranks"]["model_state_bytes"][0])
        print(f"{cfg['strategy']}/{cfg['activation_checkpoint']}/{cfg['offload_optimizer']}: "
              f"predicted peak {ref['fit_peak_bytes']:.0f} B, measured state + step tensors {measured} B; "
              f"predicted step {ref['fit_step_s']:.4f} s")
PY
echo "fit: ok"
