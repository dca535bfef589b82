# beam-datagen: `make demo` and `make test` work from a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
DEMO   ?= demo

.PHONY: demo test test-fast bench bench-peers clean media-tools compile

# The venv is rebuilt when setup.py changes; the stamp marks a finished install.
$(VENV)/.installed: setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

# The project's bytecode, as pip compiles an installed package's: where
# PYTHONDONTWRITEBYTECODE is set, every process (and every local worker) would
# compile the project's modules again, about 0.4 s a start. Only changed
# modules are compiled again.
compile: $(VENV)/.installed
	$(PY) -m compileall -q transforms pipelines benchmarks

# NVIDIA DALI (about 1 GB) for the tests that read datasets with it: a step of its
# own, so `make demo` does without it; redone when the main install is.
$(VENV)/.dali: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[dali]'
	touch $@

# An audio-visual corpus (64 speakers, 2 s H.264 clips, FLAC or AAC voices, one
# broken sample) cut into single-frame examples: a frame with 0.5 s of audio,
# labelled by speaker and voice register, split by speaker.
demo: compile
	rm -rf $(DEMO)
	$(PY) -m pipelines.sample_corpus --kind av --output $(DEMO)/corpus --shards 4 \
	    --samples_per_shard 16 --speakers 64 --bad_samples 1
	$(PY) -m pipelines.tar_to_tfrecord --input '$(DEMO)/corpus/*.tar' --output $(DEMO)/dataset \
	    --cut frames --video_field mp4 --audio_fields flac --fps 2 --frame_size 112x112 \
	    --av_window_s 0.5 \
	    --features 'label=cls:int64,speaker=json.speaker:bytes,register=json.register:int64' \
	    --label_field cls --split_by json.speaker --splits train=0.7,eval=0.15,test=0.15 \
	    --max_failure_fraction 0.05
	$(PY) -m pipelines.inspect $(DEMO)/dataset --examples 1 --report $(DEMO)/report.png

# Tests check our decoders against files made by independent encoders
# (Debian's ffmpeg and sox) and speech spoken by espeak-ng; install them if
# the machine lacks them.
media-tools:
	@command -v ffmpeg >/dev/null && command -v sox >/dev/null && command -v espeak-ng >/dev/null || \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ffmpeg sox espeak-ng >/dev/null)

test: compile $(VENV)/.dali media-tools
	$(PY) -m ruff check .
	$(PY) -m pytest -q -n 2 tests

# The loop while editing: lint, and every test but the slow ones (subprocess jobs, memory).
test-fast: compile $(VENV)/.dali
	$(PY) -m ruff check .
	$(PY) -m pytest -q -n 2 -m "not slow" tests

bench: compile
	$(PY) -m benchmarks.encoder_bench
	$(PY) -m benchmarks.kernels_bench
	test -f $(DEMO)/dataset/manifest.json || $(MAKE) demo
	$(PY) -m benchmarks.compression_bench --dataset $(DEMO)/dataset
	$(PY) -m benchmarks.array_record_bench
	$(PY) -m benchmarks.writer_bench
	$(PY) -m benchmarks.workers_bench
	$(PY) -m benchmarks.final_step_bench
	$(PY) -m benchmarks.final_step_alone_bench
	$(PY) -m benchmarks.checksum_bench
	$(PY) -m benchmarks.audio_bench
	$(PY) -m benchmarks.segments_bench
	$(PY) -m benchmarks.duplicates_bench
	$(PY) -m benchmarks.audio_pipeline_bench
	$(PY) -m benchmarks.video_bench
	$(PY) -m benchmarks.long_media_bench
	$(PY) -m benchmarks.bigtable_bench
	$(PY) -m benchmarks.transform_bench
	$(PY) -m benchmarks.features_bench
	$(PY) -m benchmarks.augment_bench
	$(PY) -m benchmarks.speech_bench

# Peers, each installed in a venv of its own under benchmarks/out (Lhotse: torch, ~5 GB;
# Hugging Face datasets: librosa and kaldi-native-fbank).
bench-peers: compile media-tools
	$(PY) -m benchmarks.peers.lhotse_bench --workdir benchmarks/out/lhotse
	$(PY) -m benchmarks.peers.datasets_bench --workdir benchmarks/out/datasets

clean:
	rm -rf $(DEMO) benchmarks/out .pytest_cache .hypothesis

# --- Dataflow flex templates (docs/dataflow.md: "Flex templates") ---------------------
# Needs the Google Cloud CLI (and Docker for template-image-local). One image,
# tagged once per pipeline, is both the launcher and the workers' SDK container.
PROJECT    ?=
REGION     ?= us-central1
BUCKET     ?=
IMAGE      ?= $(REGION)-docker.pkg.dev/$(PROJECT)/beam-datagen/beam-datagen
PIPELINES  := tar_to_tfrecord manifest_to_tfrecord parquet_to_tfrecord bigtable_to_tfrecord tar_to_bigtable
# template-run: which template, its parameters (gcloud list syntax: for values with
# commas, start with another delimiter, e.g. '^;^input=...;features=flac:bytes,cls:int64'),
# and the job's name.
PIPELINE   ?= tar_to_tfrecord
PARAMETERS ?=
BUILD_FLAGS ?=
JOB        ?= datagen-$(subst _,-,$(PIPELINE))-$(shell date +%Y%m%d-%H%M%S)
TEMPLATES  := gs://$(BUCKET)/templates

.PHONY: template-image template-image-local template-build template-run template-vars

template-vars:
	@test -n "$(PROJECT)" || (echo "set PROJECT (and BUCKET, REGION, IMAGE)" >&2; exit 1)
	@test -n "$(BUCKET)" || (echo "set BUCKET: templates, temp and staging files go there" >&2; exit 1)

# Build and push $(IMAGE):<pipeline> for every pipeline, on Cloud Build.
template-image: template-vars
	gcloud builds submit --project=$(PROJECT) --config=dataflow_templates/cloudbuild.yaml \
	    --substitutions=_IMAGE=$(IMAGE),_PIPELINES="$(PIPELINES)" .

# The same with the local Docker engine.
template-image-local: template-vars
	dataflow_templates/build_images.sh $(IMAGE) $(PIPELINES)

# Write each pipeline's template spec to $(TEMPLATES)/<pipeline>.json
# (BUILD_FLAGS=--print-only shows the specs instead, offline).
template-build: template-vars
	for p in $(PIPELINES); do \
	    gcloud dataflow flex-template build $(TEMPLATES)/$$p.json --project=$(PROJECT) \
	        --image=$(IMAGE):$$p --sdk-language=PYTHON \
	        --metadata-file=dataflow_templates/$$p/metadata.json $(BUILD_FLAGS) || exit 1; \
	done

# Launch $(PIPELINE)'s template; its workers run the same image.
template-run: template-vars
	gcloud dataflow flex-template run $(JOB) --project=$(PROJECT) --region=$(REGION) \
	    --template-file-gcs-location=$(TEMPLATES)/$(PIPELINE).json \
	    --temp-location=gs://$(BUCKET)/tmp --staging-location=gs://$(BUCKET)/staging \
	    --additional-pipeline-options=sdk_container_image=$(IMAGE):$(PIPELINE) \
	    --parameters='$(PARAMETERS)'
