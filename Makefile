# Every target bootstraps .venv itself: a fresh machine needs only Python 3.10+ and Java.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
export SPARK_LOCAL_IP ?= 127.0.0.1

.PHONY: demo test test-spark bench bench-full bench-gpu lint clean venv soak

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Re-install when the project metadata changes (editable install: code edits need no reinstall).
$(VENV)/.installed-base: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

# the tests cover the Spark glue too, so the test install includes the spark extra
$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed-base
	$(BIN)/pip install --quiet -e ".[test,spark]"
	touch $@

$(VENV)/.installed-bench: pyproject.toml $(VENV)/.installed-base
	$(BIN)/pip install --quiet -e ".[bench]"
	touch $@

venv: $(VENV)/.installed-test

demo: $(VENV)/.installed-base
	$(BIN)/gpu-ivm demo

test-spark: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q tests/test_spark_glue.py tests/test_spark_local.py

# A scratch venv with NVIDIA's numba-cuda (it replaces numba.cuda, so not the project venv):
# the tests compile every CUDA kernel to PTX for sm_90 with it (no GPU or driver needed).
PTX_VENV := .venv-ptx
$(PTX_VENV)/.installed:
	$(PYTHON) -m venv $(PTX_VENV)
	$(PTX_VENV)/bin/pip install --quiet --upgrade pip
	$(PTX_VENV)/bin/pip install --quiet numpy "numba-cuda[cu12]>=0.30"
	touch $@

test: $(VENV)/.installed-test $(PTX_VENV)/.installed
	$(BIN)/ruff check .
	GPU_IVM_PTX_PYTHON=$(CURDIR)/$(PTX_VENV)/bin/python $(BIN)/python -m pytest -q

bench: $(VENV)/.installed-bench
	$(BIN)/python -m bench --quick

bench-full: $(VENV)/.installed-bench
	$(BIN)/python -m bench --full

# the engine soak, then 10^4 fuzzed input files per reader test (IO_FUZZ_EXAMPLES to change)
soak: $(VENV)/.installed-test
	$(BIN)/python -m bench.soak --minutes $(or $(MINUTES),5)
	GPU_IVM_IO_FUZZ_EXAMPLES=$(or $(IO_FUZZ_EXAMPLES),10000) $(BIN)/python -m pytest -q \
		tests/test_io_fuzz_files.py

# the GPU run gets its own venv: numba-cuda replaces numba.cuda for every user of numba
GPU_VENV := .venv-gpu
# on a machine with an NVIDIA GPU: the count engine on cuda and cpu side by side (R-MAT 18 at
# B = 10^3, 10^4, 10^5 and celebrity churn; every count checked), then the demo on cuda.
# CUDA 13 nodes: make bench-gpu GPU_EXTRA=gpu-cu13. Without a GPU it says so and stops.
GPU_EXTRA ?= gpu
$(GPU_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(GPU_VENV)
	$(GPU_VENV)/bin/pip install --quiet --upgrade pip
	$(GPU_VENV)/bin/pip install --quiet -e ".[$(GPU_EXTRA)]"
	touch $@

bench-gpu: $(GPU_VENV)/.installed
	$(GPU_VENV)/bin/python -m bench.gpu_latency --out bench/results/gpu_latency.json
	$(GPU_VENV)/bin/python -m bench.gpu_run --out bench/results/gpu_run.jsonl
	GPU_IVM_BACKEND=cuda $(GPU_VENV)/bin/gpu-ivm demo

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) $(PTX_VENV) $(GPU_VENV) build dist *.egg-info .pytest_cache .ruff_cache
