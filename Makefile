# beam-datagen: `make demo` and `make test` work from a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
DEMO   ?= demo

.PHONY: demo test bench clean

# The venv is rebuilt when setup.py changes; the stamp marks a finished install.
$(VENV)/.installed: setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

demo: $(VENV)/.installed
	rm -rf $(DEMO)
	$(PY) -m pipelines.sample_corpus --output $(DEMO)/corpus --shards 4 --samples_per_shard 64 --speakers 64 --bad_samples 1
	$(PY) -m pipelines.tar_to_tfrecord --input '$(DEMO)/corpus/*.tar' --output $(DEMO)/dataset \
	    --features 'payload=bin:bytes,label=cls:int64,speaker=json.speaker:bytes,json.gain:float' \
	    --split_by '__key__:^([^_]+)' --splits train=0.7,eval=0.15,test=0.15 --num_shards 2
	$(PY) -m pipelines.inspect $(DEMO)/dataset

test: $(VENV)/.installed
	$(PY) -m pytest -q -n 2 tests

bench: $(VENV)/.installed
	$(PY) -m benchmarks.encoder_bench
	$(PY) -m benchmarks.tar_pipeline_bench

clean:
	rm -rf $(DEMO) benchmarks/out .pytest_cache .hypothesis
