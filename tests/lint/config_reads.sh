#!/usr/bin/env bash
# Keys are read typed, through the struct that declares them (harness/spec/config.h:
# config<S>(point)), never by string: fails on `get_string("KEY")`, `get_int("KEY")`,
# `get_double("KEY")` or `get_bool("KEY")` in harness/, workloads/ or suite/ for a registered
# KEY outside the file that declares it (the one with `f.add("KEY"` / `f.name("KEY"`).
# The harness's own base keys (task, world, steps, ...: BaseConfig) may also be read by the
# harness files that handle points before they are whole (expansion, provenance, the ETA):
# tests/lint/config_reads.allow lists them, "path key" per line, each with its reason above.
#   config_reads.sh SHARDBENCH SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
cd "$src"
table=$("$bin" keys)
keys=$(awk 'NR > 2 && NF == 0 {exit} NR > 2 {print $1}' <<<"$table")
[ -n "$keys" ] || { echo "could not read the registered keys from $bin keys" >&2; exit 2; }
allow=tests/lint/config_reads.allow
bad=0 n=0
while IFS= read -r key; do
  n=$((n + 1))
  k=$(printf '%s' "$key" | sed 's/[.]/[.]/g')
  hits=$(grep -rnE "get_(string|int|double|bool)\(\"$k\"\)" harness workloads suite \
           --include='*.cpp' --include='*.h' || true)
  [ -z "$hits" ] && continue
  decl=$(grep -rlE "f\.(add|name)\(\"$k\"" harness workloads suite --include='*.cpp' || true)
  while IFS= read -r line; do
    file=${line%%:*}
    grep -qxF "$file" <<<"$decl" && continue
    grep -qxF "$file $key" <(grep -v '^#' "$allow") && continue
    echo "$line"
    echo "  ^ reads key '$key' by string outside its declaration (${decl:-no f.add/f.name found}):" \
         "read the declaring struct with config<S>(point)"
    bad=1
  done <<<"$hits"
done <<<"$keys"
[ "$n" -gt 50 ] || { echo "only $n keys read from $bin keys: the table's format changed?" >&2; exit 2; }
[ $bad -eq 0 ] && echo "no key of the $n registered is read by string outside its declaration"
exit $bad
