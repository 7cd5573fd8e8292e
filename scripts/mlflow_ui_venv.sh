#!/bin/sh
# The MLflow UI for tests/viewers: a small virtual environment of its own with the full MLflow (its tracking
# server and UI). Full mlflow pins graphene<4, which the Phoenix server (arize-phoenix) in .venv cannot share,
# so the UI runs from here, over the sqlite store the tests write with .venv's mlflow-skinny. Both are the same
# version (that of mlflow-skinny in $VENV, else MLFLOW_VERSION), so the store's schema is the one the server
# expects. Idempotent: a venv that already has that version is left as it is (no pip, no network).
#   scripts/mlflow_ui_venv.sh [DIR]      DIR: .cache/mlflow-ui; VENV: .venv; PYTHON: python3
set -eu
DIR=${1:-.cache/mlflow-ui}
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
if [ -z "${MLFLOW_VERSION:-}" ]; then
    MLFLOW_VERSION=$("$VENV/bin/python" -c "from importlib.metadata import version; print(version('mlflow-skinny'))" \
        2>/dev/null || echo 3.17.2)
fi
STAMP="$DIR/.mlflow-$MLFLOW_VERSION"

if [ -f "$STAMP" ] && [ -x "$DIR/bin/mlflow" ]; then
    exit 0
fi
rm -rf "$DIR"
"$PYTHON" -m venv "$DIR"
"$DIR/bin/pip" install -q --disable-pip-version-check "mlflow==$MLFLOW_VERSION"
"$DIR/bin/mlflow" --version >/dev/null
touch "$STAMP"
echo "the MLflow $MLFLOW_VERSION server and UI are in $DIR"
