PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/histmig convert fixtures/sample.jsonl $(VENV)/sample.converted.jsonl
	@echo "converted archive: $(VENV)/sample.converted.jsonl"
	$(BIN)/histmig check $(VENV)/sample.converted.jsonl

test: $(STAMP)
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV)
