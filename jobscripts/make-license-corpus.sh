#!/usr/bin/env bash
# A small real-English corpus from what every Debian machine has: the license texts in
# /usr/share/common-licenses (GPL, LGPL, Apache, MPL, GFDL, Artistic, BSD, CC0; about 200 KB),
# one .txt document per distinct file (the symlinks GPL -> GPL-3 etc. skipped), for suites
# that need real text and no download (suite/paper-3d-loss.toml; docs/DATA.md section 4).
#   jobscripts/make-license-corpus.sh [OUT_DIR]    (default results/license-corpus)
set -euo pipefail
out=${1:-results/license-corpus}
src=/usr/share/common-licenses
[[ -d $src ]] || { echo "make-license-corpus: $src is missing (Debian's base-files has it)" >&2; exit 1; }
mkdir -p "$out"
n=0
for f in "$src"/*; do
  [[ -f $f && ! -L $f ]] || continue
  cp "$f" "$out/$(basename "$f").txt"
  n=$((n + 1))
done
(( n >= 2 )) || { echo "make-license-corpus: fewer than 2 documents in $src" >&2; exit 1; }
echo "make-license-corpus: $n documents, $(du -sk "$out" | cut -f1) KB in $out"
