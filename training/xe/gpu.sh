#!/usr/bin/env bash
# Stage 1 + 5-fold CV + final for several variants side by side on one lent GPU (the device tool),
# from a bundle holding WORK's tok/, e5_pruned.npz, examples/ and eval/. On that machine:
#   bash training/xe/gpu.sh BUNDLE BASE_MINUTES FINE_MINUTES VARIANT...    (results: run.py collect -> $OUT)
# Training stops at LIMIT seconds (default 540) whatever happens, so that what finished comes back.
set -uo pipefail
cd "$(dirname "$0")/../.."
bundle=$1; base=$2; fine=$3; shift 3
work=/tmp/xe
mkdir -p "$work"; cp -r "$bundle"/. "$work"/
export PYTHONUNBUFFERED=1
start=$SECONDS
python3 training/xe/run.py tokenize --work "$work" --workers 14 || exit 1
echo "tokenized in $((SECONDS - start)) s"
pids=()
for v in "$@"; do
  timeout $(( ${LIMIT:-540} - (SECONDS - start) )) python3 training/xe/run.py train --work "$work" --variant "$v" \
    --device cuda --threads 4 --base-minutes "$base" --fine-minutes "$fine" ${EXTRA_ARGS:-} > "$work/$v.log" 2>&1 & pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
for v in "$@"; do echo "== $v"; grep -v '^\s*$' "$work/$v.log" | tail -n 14 | cut -c1-1500; done
python3 training/xe/run.py collect --work "$work" --out "${OUT:-$work/collected}" --keep "${KEEP:-2}"
nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv || true
echo "total $((SECONDS - start)) s"
exit $status
