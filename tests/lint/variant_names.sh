#!/usr/bin/env bash
# Variants are asked through their records, never compared by name (docs/ARCHITECTURE.md
# "Variants"): fails on `== "NAME"` / `!= "NAME"` (either side) in harness/, workloads/ or
# suite/ for a registered strategy, compressor or model family NAME, outside the variant's own
# files. "none" (the absence of a variant; also a value of many keys) and "auto" are not checked; a name
# that is also a dtype (bf16, fp16) is checked where it can only mean the variant.
#   variant_names.sh SHARDBENCH SOURCE_DIR
# Names come from the binary (`keys`: the strategy and compressor name sets; `models`: the
# family column), so a new variant is checked without editing this file. The allow-list
# tests/lint/variant_names.allow ("path name" per line) is empty for these three kinds, as the
# Mesh issue asks; keep it so.
set -euo pipefail
bin=$1 src=$2
cd "$src"

names_of_set() {  # the names listed under "SET:" by `shardbench keys`
  "$bin" keys | awk -v s="$1:" '$0 == s {on = 1; next} /^[a-z_]+:$/ {on = 0} on && NF {print $1}'
}
# A variant's own files: strategy_<name>.cpp, compress_<name>.cpp (and .h), a family's
# <name>.cpp, <name>.h, <name>_family.cpp and the config.json reader of its own.
own_files() {
  case $1 in
    strategy) echo "workloads/fsdp/strategy_$2.cpp" ;;
    compressor) echo "workloads/comm/compress_$2.cpp workloads/comm/compress_$2.h" ;;
    family) echo "workloads/models/$2.cpp workloads/models/$2.h workloads/models/$2_family.cpp" ;;
  esac
}

allow=tests/lint/variant_names.allow
bad=0
check() {  # KIND NAME
  local kind=$1 name=$2 own hits line file
  # "auto" (a value chosen for the point: `shardbench fit`, the backend table) is no variant either.
  [ "$name" = none ] || [ "$name" = auto ] && return 0
  own=" $(own_files "$kind" "$name") "
  # A name that is also a dtype (bf16, fp16 as wire formats) means the variant only in the
  # layers that hold these variants: the communication layer and the engine.
  local where="harness workloads suite"
  grep -qxF "$name" <<<"$dtypes" && where="workloads/comm workloads/fsdp"
  hits=$(grep -rnE "(==|!=)[[:space:]]*\"$name\"|\"$name\"[[:space:]]*(==|!=)" \
           $where --include='*.cpp' --include='*.h' || true)
  while IFS= read -r line; do
    [ -z "$line" ] && continue
    file=${line%%:*}
    [[ $own == *" $file "* ]] && continue
    [ -f "$allow" ] && grep -qxF "$file $name" "$allow" && continue
    echo "$line"
    echo "  ^ compares the $kind name '$name' outside its own files: ask its record instead" \
         "(what the variant can do), or move the code into $(own_files "$kind" "$name" | cut -d' ' -f1)"
    bad=1
  done <<<"$hits"
}

dtypes=$(names_of_set dtype)
strategies=$(names_of_set strategy)
compressors=$(names_of_set compressor)
families=$("$bin" models | awk 'NR > 1 {print $2}' | sort -u)
[ -n "$strategies" ] && [ -n "$compressors" ] && [ -n "$families" ] || {
  echo "could not read the registered names from $bin (keys, models)" >&2
  exit 2
}
for n in $strategies; do check strategy "$n"; done
for n in $compressors; do check compressor "$n"; done
for n in $families; do check family "$n"; done
if [ $bad = 0 ]; then
  echo "no variant-name comparison outside registrations ($(wc -w <<<"$strategies $compressors $families") names)"
fi
exit $bad
