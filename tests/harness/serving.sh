#!/usr/bin/env bash
# suite/serving-small.toml end to end: the sweep (sequential, static and continuous batching of
# gpt2-tiny over four Poisson rates), its HDF5 tables and the report's Serving section.
# Asserted: every point is done and served every request with exactly its drawn output length
# (one /requests row each, one /serve_steps row per step, the steps' decoded rows adding up
# to the tokens after the first); the sequential floor never decodes more than one row; the
# report has the section, a goodput row per policy line and the three serving plots. BERT
# requests (bert-tiny): one label each, no decode, packed rows computing fewer positions.
# Usage: serving.sh build/shardbench
source "$(dirname "$0")/preamble.sh"
src=$(cd "$(dirname "$0")/../.." && pwd)
# plan warns when the length ranges allow requests longer than the context (refused, counted).
printf '[base]\ntask = "serve"\nmodel = "gpt2-tiny"\noutput_len_max = 120\n' > "$d/long.toml"
out=$("$sb" plan "$d/long.toml" 2>&1) || fail "plan refused a suite it should only warn about: $out"
grep -qF "prompt_len_max (default): warning: prompt_len_max 32 + output_len_max 120 exceeds model gpt2-tiny's 128 positions" <<<"$out" ||
  fail "plan did not warn about requests longer than the context: $out"
"$sb" sweep "$src/suite/serving-small.toml" --results "$d/r" > "$d/sweep.log" 2>&1 ||
  { cat "$d/sweep.log"; fail "sweep"; }
"$sb" report "$d/r" > "$d/report.log" 2>&1 || { cat "$d/report.log"; fail "report"; }
/usr/bin/python3 - "$d/r" <<'PY'
import glob, json, sys, h5py
import numpy as np
n = 0
for f in sorted(glob.glob(f"{sys.argv[1]}/points/*.h5")):
    with h5py.File(f) as h:
        assert h.attrs["status"] == "done", (f, h.attrs["status"], h.attrs["failure_reason"])
        cfg = json.loads(h.attrs["config"])
        s = {k: float(v) for k, v in h["scalars"].attrs.items()}
        r, st = h["requests"], h["serve_steps"]
        out = r["output_tokens"][()]
        assert len(out) == 48 and s["requests_served"] == 48 and s["requests_refused"] == 0, s
        assert out.min() >= 4 and out.max() <= 60, (out.min(), out.max())
        # static decodes finished rows as padding; the others decode exactly the tokens after each first
        rows = int(st["decode_rows"][()].sum())
        if cfg["serve_policy"] == "static":
            assert rows >= int((out - 1).sum()), (rows, (out - 1).sum())
        else:
            assert rows == int((out - 1).sum()), (cfg["serve_policy"], rows, (out - 1).sum())
        if cfg["serve_policy"] == "sequential":
            assert st["decode_rows"][()].max() == 1
        assert (r["ttft_s"][()] >= r["queue_s"][()]).all() and (r["e2e_s"][()] >= r["ttft_s"][()]).all()
        print(f'{cfg["serve_policy"]:>10} {cfg["request_rate"]:7g} req/s: TTFT p99 {1e3 * s["ttft_p99_s"]:.2f} ms, '
              f'TPOT p99 {1e3 * s["tpot_p99_s"]:.3f} ms, batch {s.get("decode_batch_mean", 0):.1f}, '
              f'SLO attainment {s["slo_attainment"]:.2f}')
        n += 1
assert n == 9, n
PY
md="$d/r/report/report.md"
grep -q '^## Serving (task = serve)' "$md" || fail "no Serving section in the report"
grep -q '^### Goodput per policy' "$md" || fail "no goodput table in the report"
[ "$(($(wc -l < "$d/r/report/tables/goodput.csv") - 1))" = 3 ] || fail "goodput.csv has not 3 policy lines"
for p in serving_latency_vs_rate serving_cdfs serving_batch; do
  [ -s "$d/r/report/plots/$p.png" ] || fail "plot $p missing"
done
cat "$d/r/report/tables/goodput.csv"

# BERT requests: one label each, at the end of the prefill (no decode); static pads each
# batch to its longest prompt, continuous packs prompts into shared rows (fewer positions).
printf '[base]\ntask = "serve"\nmodel = "bert-tiny"\nbatch = 8\narrival = "offline"\nrequests = 32\nprompt_len_min = 4\nprompt_len_max = 100\nwarmup = 1\n[axes]\nserve_policy = ["static", "continuous"]\n' > "$d/bert.toml"
"$sb" sweep "$d/bert.toml" --results "$d/b" > "$d/bert.log" 2>&1 || { cat "$d/bert.log"; fail "bert sweep"; }
"$sb" report "$d/b" > "$d/bert-report.log" 2>&1 || { cat "$d/bert-report.log"; fail "bert report"; }
/usr/bin/python3 - "$d/b" <<'PY'
import glob, json, sys, h5py
cost = {}
for f in sorted(glob.glob(f"{sys.argv[1]}/points/*.h5")):
    with h5py.File(f) as h:
        assert h.attrs["status"] == "done", (f, h.attrs["failure_reason"])
        policy = json.loads(h.attrs["config"])["serve_policy"]
        r, st = h["requests"], h["serve_steps"]
        assert len(r["output_tokens"]) == 32 and (r["output_tokens"][()] == 1).all()
        assert (r["e2e_s"][()] == r["ttft_s"][()]).all() and st["decode_rows"][()].sum() == 0
        want = {"static": "padded", "continuous": "packed"}[policy]
        assert h["texts"].attrs["prefill_batching"] == want, dict(h["texts"].attrs)
        cost[policy] = (int(st["prompt_tokens"][()].sum()), int(st["prefill_tokens"][()].sum()))
print("BERT prompt tokens, positions computed:", cost)
assert cost["static"][0] == cost["continuous"][0], cost
assert cost["continuous"][1] < cost["static"][1], cost
PY
grep -q "prefill_efficiency" "$d/b/report/report.md" || fail "BERT report lacks prefill_efficiency"
echo "serving suite: OK"
