#!/usr/bin/env bash
# Reproduce the shipped grounding detector (src/groundtrace/detector/grounding.{onnx,json}) from
# scratch: synthetic data -> claim features -> network -> ONNX. Needs the dev venv (make test set it
# up: torch, scikit-learn). About 17 minutes on the 2-core dev machine; see docs/grounding-model-card.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
WORK=${1:-.cache/detector}
mkdir -p "$WORK"
"$PY" training/synth.py --out "$WORK/synth" --per-language 6000 --seed 0
"$PY" training/detector_features.py "$WORK"/synth/synth_{en,ru,zh}.jsonl --out "$WORK/synth.npz" --workers 2
"$PY" training/train_detector.py --features "$WORK/synth.npz:spans:1" --epochs 10 --seed 0 --out src/groundtrace/detector
