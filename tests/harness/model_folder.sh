#!/usr/bin/env bash
# Local Hugging Face model folders through the CLI (the Realdata issue):
#  1. plan: a folder plans like the preset it describes (same parameter counts and
#     state/rank), a config.json field we do not implement is an error at the `model` key
#     naming the file, field, value, and so are weights that would not load (read from the
#     safetensors headers: here a folder with only pytorch_model.bin, and the fix, as a
#     model and as a distillation teacher);
#  2. run: gpt2-tiny trains and exports a folder (export_folder); that folder fine-tunes
#     (model = folder: its weights are the start, init = "") under full_shard on 2 ranks and
#     serves inference; a bad `init` path is a plan warning, then a clear run error.
# Usage: model_folder.sh build/shardbench
source "$(dirname "$0")/preamble.sh"

# ---- 1. plan ---------------------------------------------------------------------------
mkdir -p "$d/tiny" "$d/relu"
cat > "$d/tiny/config.json" <<'EOF'
{"model_type": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": 64, "vocab_size": 256,
 "n_positions": 128, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new"}
EOF
sed 's/"gelu_new"/"relu"/' "$d/tiny/config.json" > "$d/relu/config.json"
# Its weights as transformers lays them out (an independent writer: json + struct).
/usr/bin/python3 "$(dirname "$0")/../data/make_gpt2_safetensors.py" "$d/tiny/model.safetensors"
for m in gpt2-tiny "$d/tiny"; do
  printf '[base]\ntask = "train"\nmodel = "%s"\nworld = 2\nstrategy = "full_shard"\n' "$m" > "$d/p.toml"
  # The point's row: params, with_heads (found by header) and state/rank (two words: "1.00 MiB").
  "$sb" plan "$d/p.toml" 2>/dev/null | awk 'NR == 2 { for (i = 1; i <= NF; ++i) { if ($i == "params") p = i; if ($i == "with_heads") w = i } }
                                           NR == 3 { print $p, $w, $(NF-1), $NF }' >> "$d/state"
done
[ "$(sed -n 1p "$d/state")" = "124672 124672 974.00 KiB" ] || fail "gpt2-tiny's plan row: $(sed -n 1p "$d/state")"
[ "$(sed -n 1p "$d/state")" = "$(sed -n 2p "$d/state")" ] ||
  fail "the folder's parameter counts or state/rank differ from gpt2-tiny's: $(tr '\n' ' ' < "$d/state")"

# `shardbench models FOLDER` counts it exactly as the preset it describes.
a=$("$sb" models gpt2-tiny | awk 'NR == 2 {print $8, $9, $10}')
b=$("$sb" models "$d/tiny" | awk 'NR == 2 {print $8, $9, $10}')
[ -n "$a" ] && [ "$a" = "$b" ] || fail "models: gpt2-tiny '$a', the folder '$b'"

printf '[base]\ntask = "train"\nmodel = "%s"\n' "$d/relu" > "$d/bad.toml"
out=$("$sb" plan "$d/bad.toml" 2>&1 >/dev/null) && fail "plan accepted activation relu"
want="$d/bad.toml:3:9: model: $d/relu/config.json: field 'activation_function' is \"relu\"; shardbench supports gelu_new, gelu_pytorch_tanh"
grep -qF "$want" <<<"$out" || fail "plan said: $out"
# Weights that would not load are found from the headers, before a sweep.
mkdir -p "$d/bin"
cp "$d/tiny/config.json" "$d/bin/"
cp "$d/tiny/model.safetensors" "$d/bin/pytorch_model.bin"
bin_says="model folder '$d/bin' holds pytorch_model.bin (PyTorch's pickle format) but no model.safetensors: shardbench reads safetensors only; convert it once, weights unchanged, with \`.venv/bin/python suite/data/convert_to_safetensors.py $d/bin\`"
for task in infer train; do
  printf '[base]\ntask = "%s"\nmodel = "%s"\n' "$task" "$d/bin" > "$d/bin.toml"
  out=$("$sb" plan "$d/bin.toml" 2>&1 >/dev/null) && fail "plan ($task) accepted a folder without safetensors"
  grep -qF "$d/bin.toml:3:9: model: $bin_says" <<<"$out" || fail "plan ($task) said: $out"
done
# ... and a distillation teacher's the same way, at the `teacher` key.
printf '[base]\ntask = "train"\nmodel = "gpt2-tiny"\nteacher = "%s"\n' "$d/bin" > "$d/bin.toml"
out=$("$sb" plan "$d/bin.toml" 2>&1 >/dev/null) && fail "plan accepted a teacher without safetensors"
grep -qF "$d/bin.toml:4:11: teacher: $bin_says" <<<"$out" || fail "plan (teacher) said: $out"
printf '[base]\ntask = "train"\nmodel = "tiny-typo"\n' > "$d/typo.toml"
out=$("$sb" plan "$d/typo.toml" 2>&1 >/dev/null) && fail "plan accepted an unknown model name"
grep -qF "(or a path: a value with '/', e.g. \"./my-model\")" <<<"$out" || fail "plan said: $out"

# ---- 2. train -> export -> fine-tune -> infer ------------------------------------------
cat > "$d/run.toml" <<EOF
[base]
model = "gpt2-tiny"
world = 2
threads = 1
steps = 3
warmup = 0
batch = 2
seq = 32
time_limit = 300

[[zip]]
task = ["train", "train", "infer"]
model = ["gpt2-tiny", "$d/out", "$d/out"]
strategy = ["no_shard", "full_shard", "no_shard"]
world = [2, 2, 1]
export_folder = ["$d/out", "", ""]
lr = [0.01, 0.0006, 0.0006]
queries = [32, 32, 2]
steps = [10, 3, 3]
EOF
"$sb" sweep "$d/run.toml" --results "$d/res" --allow-oversubscribe > "$d/sweep.log" 2>&1 ||
  { cat "$d/sweep.log"; fail "the train -> export -> fine-tune -> infer sweep failed"; }
[ -f "$d/out/config.json" ] && [ -f "$d/out/model.safetensors" ] || fail "no exported folder"
grep -q '"model_type": "gpt2"' "$d/out/config.json" || fail "config.json: $(cat "$d/out/config.json")"
[ "$(ls "$d"/res/points/*.h5 | wc -l)" = 3 ] || fail "expected 3 result files: $(ls "$d/res/points")"

# The fine-tune starts from the exported weights: its first loss is near the exporter's last
# (10 steps at lr 0.01), far below a fresh model's ln(256) = 5.55.
first_loss=$(/usr/bin/python3 - "$d/res" <<'EOF'
import glob, sys, h5py
for f in sorted(glob.glob(sys.argv[1] + "/points/*.h5")):
    with h5py.File(f) as h:
        cfg = h.attrs["config"]
        cfg = cfg.decode() if isinstance(cfg, bytes) else cfg
        if '"full_shard"' in cfg and '"train"' in cfg:
            print(float(h["steps"]["loss"][0]))
EOF
)
echo "fine-tune's first loss: $first_loss"
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$first_loss') < 5.3 else 1)" ||
  fail "the fine-tune did not start from the exported weights (first loss $first_loss)"

# What a folder holds that is not a parameter (here the attn.bias buffers and the tied
# lm_head.weight of tests/data/make_gpt2_safetensors.py) is skipped, and said: printed by
# rank 0 and recorded as the text checkpoint_note.
printf '[base]\ntask = "infer"\nmodel = "%s"\nbatch = 2\nseq = 4\nqueries = 2\nwarmup = 0\n' "$d/tiny" > "$d/note.toml"
"$sb" sweep "$d/note.toml" --results "$d/note" > "$d/note.log" 2>&1 || { cat "$d/note.log"; fail "note sweep"; }
/usr/bin/python3 - "$d/note" "$d/tiny/model.safetensors" <<'EOF' || fail "checkpoint_note"
import glob, sys, h5py
(f,) = glob.glob(sys.argv[1] + "/points/*.h5")
with h5py.File(f) as h:
    note = h["texts"].attrs["checkpoint_note"]
    note = note.decode() if isinstance(note, bytes) else note
want = (f"checkpoint '{sys.argv[2]}': skipped 3 tensors that are not parameters (causal-mask "
        "buffer: transformer.h.0.attn.bias [F32], transformer.h.1.attn.bias [F32]; LM head, "
        "tied to wte: transformer.lm_head.weight [F32])")
assert note == want, (note, want)
EOF
grep -rqF "note: checkpoint '$d/tiny/model.safetensors': skipped 3 tensors" "$d/note.log" "$d/note" ||
  fail "rank 0 did not print the checkpoint note"

# A missing init: a warning at plan time, then a clear error naming it.
printf '[base]\ntask = "train"\nmodel = "gpt2-tiny"\ninit = "%s/none"\nsteps = 1\nwarmup = 0\n' "$d" > "$d/init.toml"
out=$("$sb" plan "$d/init.toml" 2>&1 >/dev/null) || fail "plan refused a missing init (it warns): $out"
grep -qF "init: warning: init '$d/none' does not exist (yet)" <<<"$out" || fail "plan said: $out"
# ---- 3. a text corpus: tokenized into the cache once, then reused ------------------------
mkdir -p "$d/corpus"
for i in 1 2 3 4 5 6; do
  for j in $(seq 1 40); do
    echo "document $i line $j: the quick brown fox jumps over the lazy dog"
  done > "$d/corpus/doc$i.txt"
done
printf '[base]\ntask = "train"\nmodel = "gpt2-tiny"\ndata = "%s/corpus"\ntokenizer = "byte"\ntoken_cache = "%s/cache"\nheldout_fraction = 0.34\nsteps = 3\nwarmup = 0\nbatch = 4\nseq = 32\n[axes]\nlr = [0.0006, 0.0007]\n' "$d" "$d" > "$d/text.toml"
"$sb" sweep "$d/text.toml" --results "$d/text" > "$d/text.log" 2>&1 ||
  { cat "$d/text.log"; fail "text sweep"; }
/usr/bin/python3 - "$d/text" <<'PY' || fail "text corpus results"
import glob, math, sys, h5py
seen = []
for f in sorted(glob.glob(sys.argv[1] + "/points/*.h5")):
    with h5py.File(f) as h:
        s, t = h["scalars"].attrs, h["texts"].attrs
        assert s["corpus_documents"] == 6 and s["corpus_heldout_documents"] == 2, dict(s)
        assert abs(s["perplexity"] - math.exp(s["final_eval_loss"])) < 1e-9 * s["perplexity"]
        seen.append(t["token_cache"].split(" ")[-1])
assert sorted(seen) == ["(reused)", "(written)"], seen
PY
[ "$(ls "$d/cache" | wc -l)" = 3 ] || fail "the cache holds: $(ls "$d/cache")"

# ---- 4. BERT MLM on the same text (WordPiece), and infer scoring held-out text -----------
mkdir -p "$d/wp"
{ printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n:\n'
  for c in a b c d e f g h i j k l m n o p q r s t u v w x y z 0 1 2 3 4 5 6 7 8 9; do
    printf '%s\n##%s\n' "$c" "$c"
  done; } > "$d/wp/vocab.txt"
cat > "$d/text2.toml" <<EOF2
[base]
data = "$d/corpus"
token_cache = "$d/cache"
heldout_fraction = 0.34
steps = 3
warmup = 0
batch = 4
seq = 32
[[zip]]
task = ["train", "infer"]
model = ["bert-tiny", "gpt2-tiny"]
tokenizer = ["bert-wordpiece", "byte"]
tokenizer_dir = ["$d/wp", ""]
queries = [32, 2]
accuracy_batches = [2, 2]
EOF2
"$sb" sweep "$d/text2.toml" --results "$d/text2" > "$d/text2.log" 2>&1 ||
  { cat "$d/text2.log"; fail "text sweep 2"; }
/usr/bin/python3 - "$d/text2" <<'PY' || fail "MLM / infer on text results"
import glob, json, sys, h5py
got = {}
for f in sorted(glob.glob(sys.argv[1] + "/points/*.h5")):
    with h5py.File(f) as h:
        got[json.loads(h.attrs["config"])["task"]] = dict(h["scalars"].attrs)
t, i = got["train"], got["infer"]
assert 0 <= t["mlm_accuracy"] <= 1 and t["corpus_documents"] == 6, t
assert "perplexity" not in t, t                       # BERT: MLM accuracy, not perplexity
assert i["perplexity"] > 1 and i["perplexity_fp32"] == i["perplexity"], i  # fp32 served
print("bert-tiny MLM accuracy on held-out text", t["mlm_accuracy"],
      "; gpt2-tiny perplexity on held-out text", i["perplexity"])
PY
echo "model folders: OK"
