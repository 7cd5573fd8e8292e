#!/usr/bin/env bash
# Several runs of run.py side by side on one lent GPU (the device tool), from a bundle holding WORK's
# tok/, e5_pruned.npz, examples/ and eval/. On that machine:
#   bash training/xe/gpu.sh BUNDLE BASE_MINUTES FINE_MINUTES SPEC...
# SPEC is TAG,VARIANT[,run.py arguments...], e.g. full,full  or  full12,full,--layers,12
# Training stops at LIMIT seconds (default 540) whatever happens, so that what finished comes back
# (run.py collect -> $OUT).
set -uo pipefail
cd "$(dirname "$0")/../.."
bundle=$1; base=$2; fine=$3; shift 3
work=/tmp/xe
mkdir -p "$work"; cp -r "$bundle"/. "$work"/
export PYTHONUNBUFFERED=1
start=$SECONDS
python3 training/xe/run.py tokenize --work "$work" --workers 14 || exit 1
echo "tokenized in $((SECONDS - start)) s"
pids=(); tags=()
for spec in "$@"; do
  IFS=, read -r tag variant extra <<< "$spec"
  tags+=("$tag")
  # shellcheck disable=SC2086
  timeout $(( ${LIMIT:-540} - (SECONDS - start) )) python3 training/xe/run.py train --work "$work" --tag "$tag" \
    --variant "$variant" --device cuda --threads 3 --base-minutes "$base" --fine-minutes "$fine" ${extra//,/ } \
    > "$work/$tag.log" 2>&1 & pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
for t in "${tags[@]}"; do echo "== $t"; grep -v '^\s*$' "$work/$t.log" | grep -v '"fold"' | tail -n 6 | cut -c1-1200; done
python3 training/xe/run.py collect --work "$work" --out "${OUT:-$work/collected}" --keep "${KEEP:-2}"
echo "total $((SECONDS - start)) s"
exit $status
