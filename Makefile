# The book's commands. `make book` and `make test` do all the set-up themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The book profile runs on the CPU; `make test-gpu` is the GPU variant.
export SEQLIB_DEVICE ?= cpu
# The stored outputs hold trained models' numbers, and sums round differently with each set
# of vector instructions: PyTorch's kernels, MKL's (its conditional numerical
# reproducibility) and oneDNN's (the convolutions) are held to AVX2 on every x86-64 CPU, so
# a newer CPU, with AVX-512, computes what the outputs were executed with.
export ATEN_CPU_CAPABILITY ?= avx2
export MKL_CBWR ?= AVX2
export ONEDNN_MAX_CPU_ISA ?= AVX2
NBVAL_OPTIONS := --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9]*.ipynb))
# The tests run on JOBS workers (pytest-xdist); nbval keeps each page whole on one worker,
# and pages that need the same trained model share it through the model cache's lock.
JOBS ?= 2
PARALLEL := -n $(JOBS) --dist loadfile --no-loadscope-reorder
# The order in which nbval hands the pages to the workers: the longest first, so that no
# worker is left alone with a long page at the end, and each page that loads another's
# models (book/chapters.yml's `needs`) well after a page that trains them, so that neither
# waits for the other: 12 trains page 6's models for 19, 11 those of pages 7 and 8, and 16
# and 17 start once 11 is done. Pages not named here follow, in order.
NBVAL_FIRST := 12 11 15 18 19 07 16 17 08 14 06 20 22 21 01 13
NBVAL_ORDER := $(foreach n,$(NBVAL_FIRST),$(wildcard notebooks/$(n)_*.ipynb))
NBVAL_ORDER += $(filter-out $(NBVAL_ORDER),$(NOTEBOOKS))
# PAGES="03 05" runs nbval on those pages alone (in `make test` too); by default on all.
PAGES ?=
NBVAL_PAGES := $(if $(strip $(PAGES)),$(filter $(foreach n,$(PAGES),notebooks/$(n)_%),\
	$(NBVAL_ORDER)),$(NBVAL_ORDER))
# Exact mode compares every cell with its stored output; portable mode only the cells tagged
# nbval-check-output, whose outputs no machine or seed changes, and runs the rest, whose
# claims the check cells assert. tests/nbval_mode.py decides (a probe of a few seconds),
# unless NBVAL_MODE=exact or NBVAL_MODE=portable says; SEQLIB_SEED other than 0 (every seed
# of the book offset by it) and a GPU mean portable mode.
NBVAL_MODE ?=

.PHONY: setup book pdf check test nbval claims test-colab test-oldest test-newest test-gpu gpu-check execute lab \
	bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=23.2"
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[test,book]"
	touch $(STAMP)

book: $(STAMP)
	rm -rf _build
	$(BIN)/jupyter-book build . -W -n --keep-going
	@echo "The book is in _build/html: open _build/html/index.html in a browser."

# The printable book: the single-page build, typeset by MathJax and printed by headless
# Chromium (book/pdf.py), then checked (tests/book/test_pdf.py).
pdf: $(STAMP)
	rm -rf _build/singlehtml _build/pdf
	$(BIN)/jupyter-book build . --builder singlehtml -W -n --keep-going
	$(BIN)/python book/pdf.py --html _build/singlehtml --out _build/pdf/book.pdf
	$(BIN)/pytest -p no:cacheprovider tests/book/test_pdf.py
	@echo "The printable book is _build/pdf/book.pdf."

# ruff and the unit tests, without the notebooks (a few minutes): the fast check of a change.
# The tests are laid out as the package: tests/library (the chapter's modules), experiments,
# exercises, diagrams, pages (the pages' tooling), book (the book's files, its build, its
# environments); those that build the book or make environments of their own are left to
# `test`, `pdf`, `test-colab` and `test-oldest`/`test-newest`.
check: $(STAMP)
	$(BIN)/ruff check seqlib tests benchmarks book
	$(BIN)/pytest -p no:cacheprovider -n $(JOBS) tests --ignore=tests/book/test_html.py \
		--ignore=tests/book/test_pdf.py --ignore=tests/book/test_colab.py \
		--ignore=tests/book/test_ends.py

# The first line says which nbval mode this machine gets and why (the nbval step decides again).
test: $(STAMP)
	@NBVAL_MODE=$(NBVAL_MODE) $(BIN)/python tests/nbval_mode.py > /dev/null
	$(MAKE) --no-print-directory check
	$(MAKE) --no-print-directory nbval
	$(MAKE) book
	$(BIN)/pytest -p no:cacheprovider -n $(JOBS) tests/book/test_html.py
	@if [ -z "$$CI" ] && [ -z "$$SEQLIB_CHROMIUM" ] && ! command -v chromium >/dev/null \
		&& ! command -v chromium-browser >/dev/null; then \
		echo "SKIPPED make pdf: no Chromium (apt-get install chromium, or set SEQLIB_CHROMIUM)"; \
	else $(MAKE) pdf; fi

# The notebooks alone, each page under nbval in the mode that this machine reproduces (above),
# with a fresh model cache: every model is trained again. The cache is removed at the end
# (KEEP_CACHE=1 keeps it, and says where, e.g. to look at a failure).
KEEP_CACHE ?=
nbval: $(STAMP)
	@for n in $(PAGES); do ls notebooks/$${n}_*.ipynb >/dev/null 2>&1 \
		|| { echo "PAGES: no page $$n (expected two digits, such as PAGES=\"03 05\")"; exit 1; }; done
	@mode=$$(NBVAL_MODE=$(NBVAL_MODE) $(BIN)/python tests/nbval_mode.py) || exit 1; \
	if [ "$$mode" = exact ]; then compare=--nbval; else compare=--nbval-lax; fi; \
	echo "pytest $$compare: $(words $(NBVAL_PAGES)) pages"; \
	cache=$$(mktemp -d); \
	SEQLIB_PROGRESS=0 SEQLIB_MODEL_CACHE=$$cache $(BIN)/pytest -p no:cacheprovider \
		$(PARALLEL) $$compare $(NBVAL_OPTIONS) $(NBVAL_PAGES); status=$$?; \
	if [ -n "$(KEEP_CACHE)" ]; then echo "the model cache is kept in $$cache"; \
	else rm -rf "$$cache"; fi; exit $$status

# The ledger of runs behind the pages' claims about trained models (book/claims.py): each run
# (a seed, the kernels, the processor or GPU) executes the pages, logs every claim's margin to
# book/claims.csv, and skips a page the ledger holds for its current code; then the results
# page's table is written again. PAGES="06 14" for some pages, RUNS="3 6/default" for some
# runs (SEED with the pins, SEED/default with the kernels' own choice, SEED/cuda on a GPU);
# by default the ledger's eight: seeds 0 to 5 pinned, 6 and 7 with other kernels.
RUNS ?=
claims: $(STAMP)
	$(BIN)/python book/claims.py run --jobs $(JOBS) $(if $(strip $(PAGES)),--pages $(PAGES)) \
		$(if $(strip $(RUNS)),--runs $(RUNS))
	$(BIN)/python book/claims.py render

# Colab's older environment: ipywidgets 7 and the oldest numpy and matplotlib that
# pyproject.toml allows, installed from the package index into a fresh virtual environment,
# where the widget tests and chapter 03 run (tests/book/test_colab.py; minutes, so not in `test`).
test-colab: $(STAMP)
	$(BIN)/pytest -p no:cacheprovider tests/book/test_colab.py

# Both ends of pyproject.toml's ranges, each in a fresh virtual environment from the package
# index, where the unit tests and three chapters (nbval) run (tests/book/test_ends.py): the oldest
# Python it claims with the lower bound of every runtime dependency, and the newest Python it
# claims with the newest release of each. Each downloads a few GB and takes many minutes.
test-oldest test-newest: test-%: $(STAMP)
	$(BIN)/pytest -p no:cacheprovider -s tests/book/test_ends.py::test_$*

# On a GPU: every page in portable mode, its models trained there (a fresh model cache).
test-gpu: $(STAMP)
	$(MAKE) --no-print-directory nbval SEQLIB_DEVICE=cuda NBVAL_MODE=portable

# On a GPU, in about 9 minutes: the benchmarks, test-gpu's check of the chapters and the full
# profile's three headline runs, sized to the time (benchmarks/gpu_check.py); writes
# _build/gpu-check/gpu-check.md, the record on the measurements page (book/gpu-check.md).
gpu-check: $(STAMP)
	$(BIN)/python -m benchmarks.gpu_check --out _build/gpu-check

# Re-execute every notebook in place on the CPU (regenerates the stored outputs), then the
# coverage and exercises pages and the box atop each page (book/chapters.yml holds the
# measured times, copied by hand from $(VENV)/execute-times.txt). Both this and `test` train
# from scratch: trained models are cached only within one run (the cache is removed at the
# end, unless KEEP_CACHE=1). The claims each page states are this run's rows of the ledger
# (book/claims.py record): the stored run.
# After running a chapter, each cell's consecutive output streams become one, and what a
# progress bar overwrote with a carriage return is dropped: the stored bar is its last frame.
COALESCE := --Exporter.preprocessors=nbconvert.preprocessors.CoalesceStreamsPreprocessor
execute: $(STAMP)
	@printf '%-48s %9s\n' notebook seconds > $(VENV)/execute-times.txt; rm -f $(VENV)/claims-failed.txt
	@export SEQLIB_MODEL_CACHE=$$(mktemp -d); for nb in $(NOTEBOOKS); do \
		start=$$(date +%s%N); rm -f $(VENV)/claims.jsonl; \
		SEQLIB_PROGRESS=0 SEQLIB_CLAIMS=$(CURDIR)/$(VENV)/claims.jsonl \
			$(BIN)/jupyter nbconvert --log-level WARN \
			--to notebook --execute --inplace --ExecutePreprocessor.timeout=900 $(COALESCE) \
			$$nb || exit 1; \
		tenths=$$(( ($$(date +%s%N) - start) / 100000000 )); \
		printf '%-48s %7d.%d\n' $$(basename $$nb) $$((tenths / 10)) $$((tenths % 10)) \
			| tee -a $(VENV)/execute-times.txt; \
		$(BIN)/python book/claims.py record $$nb $(VENV)/claims.jsonl \
			|| echo $$nb >> $(VENV)/claims-failed.txt; \
	done; if [ -n "$(KEEP_CACHE)" ]; then echo "the model cache is kept in $$SEQLIB_MODEL_CACHE"; \
	else rm -rf "$$SEQLIB_MODEL_CACHE"; fi
	@echo; cat $(VENV)/execute-times.txt
	$(BIN)/python book/coverage.py
	$(BIN)/python book/exercises.py
	$(BIN)/python book/headers.py
	$(BIN)/python book/claims.py render
	@if [ -s $(VENV)/claims-failed.txt ]; then echo "pages with a claim that did not hold:"; \
		cat $(VENV)/claims-failed.txt; exit 1; fi

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks

# Options for the Section 7.5 benchmarks and the input pipeline's (bench_batches): `make bench
# BENCH_ARGS=--quick` is a smoke run that writes nothing; BENCH_ARGS="--device cuda" measures
# on a GPU.
bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench_recurrent
	$(BIN)/python -m benchmarks.bench_attention $(BENCH_ARGS)
	$(BIN)/python -m benchmarks.bench_scaling $(BENCH_ARGS)
	$(BIN)/python -m benchmarks.bench_batches $(BENCH_ARGS)

clean:
	rm -rf _build .pytest_cache .ruff_cache
