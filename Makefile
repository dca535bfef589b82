# beam-datagen: `make demo` and `make test` work from a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
DEMO   ?= demo

.PHONY: demo test bench clean media-tools

# The venv is rebuilt when setup.py changes; the stamp marks a finished install.
$(VENV)/.installed: setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

# An audio-visual corpus (16 speakers, 2 s H.264 clips, FLAC or AAC voices, one
# broken sample) cut into single-frame examples: a frame with 0.5 s of audio.
demo: $(VENV)/.installed
	rm -rf $(DEMO)
	$(PY) -m pipelines.sample_corpus --kind av --output $(DEMO)/corpus --shards 4 \
	    --samples_per_shard 16 --speakers 16 --bad_samples 1
	$(PY) -m pipelines.tar_to_tfrecord --input '$(DEMO)/corpus/*.tar' --output $(DEMO)/dataset \
	    --cut frames --video_field mp4 --audio_fields flac --fps 2 --frame_size 112x112 \
	    --av_window_s 0.5 --features 'label=cls:int64,speaker=json.speaker:bytes' \
	    --split_by json.speaker --splits train=0.7,eval=0.15,test=0.15 --max_failure_fraction 0.05
	$(PY) -m pipelines.inspect $(DEMO)/dataset --examples 1

# Tests check our decoders against files made by independent encoders
# (Debian's ffmpeg and sox); install them if the machine lacks them.
media-tools:
	@command -v ffmpeg >/dev/null && command -v sox >/dev/null || \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ffmpeg sox >/dev/null)

test: $(VENV)/.installed media-tools
	$(PY) -m pytest -q -n 2 tests

bench: $(VENV)/.installed
	$(PY) -m benchmarks.encoder_bench
	$(PY) -m benchmarks.tar_pipeline_bench
	$(PY) -m benchmarks.audio_bench
	$(PY) -m benchmarks.video_bench
	$(PY) -m benchmarks.bigtable_bench
	$(PY) -m benchmarks.transform_bench

clean:
	rm -rf $(DEMO) benchmarks/out .pytest_cache .hypothesis
