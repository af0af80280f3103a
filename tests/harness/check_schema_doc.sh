#!/usr/bin/env bash
# docs/HDF5_SCHEMA.md's record-column tables are the output of `shardbench schema --markdown`
# (generated from harness/trace/records.h), between the BEGIN/END generated markers.
#   check_schema_doc.sh SHARDBENCH DOC           fails, with the diff, when they differ (ctest)
#   check_schema_doc.sh SHARDBENCH DOC --update  rewrites the region with the command's output
set -euo pipefail
bin=$1 doc=$2 mode=${3:-check}
begin='<!-- BEGIN generated: shardbench schema markdown (from harness/trace/records.h) -->'
end='<!-- END generated -->'

[ "$(grep -cxF -- "$begin" "$doc")" = 1 ] && [ "$(grep -cxF -- "$end" "$doc")" = 1 ] || {
  echo "$doc: needs exactly one line '$begin' and one '$end' around the column tables" >&2
  exit 1
}
want=$(mktemp) have=$(mktemp)
trap 'rm -f "$want" "$have"' EXIT
"$bin" schema --markdown >"$want"
# The lines strictly between the markers.
awk -v b="$begin" -v e="$end" '$0 == e {on = 0} on {print} $0 == b {on = 1}' "$doc" >"$have"

if [ "$mode" = --update ]; then
  awk -v b="$begin" -v e="$end" -v gen="$want" '
    $0 == b {print; while ((getline line < gen) > 0) print line; skip = 1; next}
    $0 == e {skip = 0}
    !skip {print}' "$doc" >"$have"
  cat "$have" >"$doc"
  echo "updated $doc"
  exit 0
fi
if ! diff -u --label "$doc (generated region)" --label "$bin schema --markdown" "$have" "$want"; then
  echo "FAILED: $doc's column tables differ from \`shardbench schema --markdown\` (above)." >&2
  echo "The tables come from harness/trace/records.h; regenerate the doc with:" >&2
  echo "  tests/harness/check_schema_doc.sh $bin $doc --update" >&2
  exit 1
fi
