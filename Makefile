# infopt: `make demo` and `make test` bootstrap everything on a fresh machine, then run.
# Engines and the model are cached per machine in $(INFOPT_CACHE_DIR) (default ~/.cache/infopt),
# keyed by version, so a fresh clone reuses them and a fresh machine builds them once.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The machine's pip config lists local index folders that do not exist; silence those warnings.
PIP_ENV := PIP_EXTRA_INDEX_URL= PIP_NO_INPUT=1
STAMP := $(VENV)/.installed

.PHONY: demo test engines venv bench clean-venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	@echo "[make] creating $(VENV) and installing infopt with its dependencies (~2 min the first time)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PIP_ENV) $(PY) -m pip install -q -e '.[test]'
	@touch $(STAMP)

engines: $(STAMP)
	@$(PIP_ENV) $(PY) -m infopt.bootstrap

demo: engines
	@$(VENV)/bin/infopt optimize

test: engines
	@$(PY) -m pytest -q -ra --durations=10

clean-venv:
	rm -rf $(VENV)
