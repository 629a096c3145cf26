PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint docs bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	mkdir -p demo-out
	$(BIN)/histmig convert fixtures/sample.jsonl demo-out/sample.v2.jsonl
	@echo "converted archive: demo-out/sample.v2.jsonl; checking it:"
	$(BIN)/histmig check demo-out/sample.v2.jsonl

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff format --check histmig tests scripts
	$(BIN)/ruff check histmig
	$(BIN)/mypy

docs: $(STAMP)
	$(BIN)/python scripts/docs.py

bench: $(STAMP)
	$(BIN)/python scripts/bench.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) demo-out
