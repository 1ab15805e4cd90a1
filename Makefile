# Two commands do all set-up on a fresh machine:  `make book`  and  `make test`.
# Both create the virtual environment on first use (.venv), so either can come first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# This machine's pip finds a local CPU wheel of torch 2.13.0; a reader with a GPU can pass TORCH_SPEC=torch
# (or install their own torch into the venv first: an installed torch is kept).
TORCH_SPEC ?= torch==2.13.0

.PHONY: setup book test unit chapters sync browser-check bench clean
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[book,test]"
	touch $@

# Build the book (executes each chapter once, through the jupyter-cache, with warnings as errors).
book: setup
	$(PY) scripts/build_book.py

# All tests: unit tests, notebook pairs in sync, every chapter in the smoke profile (sharing the book's cache).
test: setup
	$(PY) -m pytest -q

bench: setup
	$(PY) -m pip install -q "xrfm==0.4.5"
	$(PY) benchmarks/bench_xrfm.py

clean:
	rm -rf _build
