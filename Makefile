# The README's two commands: `make demo` and `make test`. Each sets up its own virtual environment.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test setup setup-test bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

setup: $(BIN)/python
	$(BIN)/pip install -q -e .

# torch first, pinned: the CPU build on disk. Anything that pulls torch later finds it satisfied
# instead of downloading gigabytes of CUDA packages.
setup-test: $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test,minilm,openai,otel,sinks-test]' \
		-e 'integrations/langchain[test]' -e 'integrations/llamaindex[test]'

demo: setup
	$(BIN)/groundtrace demo

test: setup-test
	$(BIN)/python -m pytest tests integrations

bench: setup
	$(BIN)/python benchmarks/throughput.py
