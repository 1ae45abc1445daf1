"""Package metadata for kerasbert. Exact versions live in constraints.txt."""

import pathlib

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent
version = {}
exec((HERE / "kerasbert" / "version.py").read_text(), version)

setup(
    name="kerasbert",
    version=version["__version__"],
    description=(
        "BERT and its family for Keras 3: vocabulary, pretraining data, "
        "pretraining, fine-tuning and TF Serving export."
    ),
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.11,<3.13",
    packages=find_packages(include=["kerasbert", "kerasbert.*"]),
    install_requires=[
        "tensorflow~=2.20.0",
        "tensorflow-text~=2.20.0",
        "keras>=3.15",
        "keras-hub~=0.32.0",
        "tensorflow-datasets~=4.9",
        # Writes the TF Serving warm-up records (PredictionLog protos).
        "tensorflow-serving-api~=2.20.0",
        "numpy",
        # Published checkpoints: hf:// and kaggle:// handles download through
        # the libraries made for them (caches, tokens, offline switches).
        "huggingface_hub",
        "kagglehub",
        # `finetune --search`: the dev-set search over learning rate x batch x epochs.
        "keras-tuner~=1.4",
        # Task metrics (seqeval entity F1, sklearn's MCC/F1, scipy's
        # Spearman), the figures runs write, progress bars of the writers.
        "seqeval",
        # text2text's BLEU: the field's reference implementation (13a tokenization).
        "sacrebleu~=2.6.0",
        "scikit-learn",
        "scipy",
        "matplotlib",
        "tqdm",
    ],
    extras_require={
        # `create-pretraining-data --runner direct|flink|spark|dataflow`: 145 MB
        # more in the environment (3.7% of the install), so an extra; the
        # test extra includes it (`make test` tests the Beam path).
        "beam": ["apache-beam~=2.77.0"],
        # `--runner dataflow`: Beam's Google Cloud extra (Cloud Storage, the
        # Dataflow client). Beam's gcp extra wants google-auth-httplib2<0.3,
        # which constraints.txt pins at 0.4.4: install it without that pin
        # (README, "Pretraining data at corpus scale").
        "dataflow": ["apache-beam[gcp]~=2.77.0"],
        # `--runner flink|spark` (Beam's portable runners): the Python side
        # needs only the SDK; the job server is Beam's Java/Docker program
        # and the workers run the SDK container or beam/boot.sh.
        "flink": ["apache-beam~=2.77.0"],
        "spark": ["apache-beam~=2.77.0"],
        # The PyTorch backend (KERAS_BACKEND=torch): the CPU build, 2.13.0+cpu
        # (864 MB in the venv, 54 s to install here); `make test-torch`
        # installs it and runs tests/models/test_torch_backend.py.
        "torch": ["torch==2.13.0"],
        # Peers used for checkpoint conversion and parity tests.
        "interop": ["tf-models-official~=2.20.0", "tf-keras~=2.20.0"],
        "test": [
            "apache-beam~=2.77.0",
            "pytest",
            # Property-based tests of the untrusted-checkpoint reader
            # (tests/reliability/test_untrusted_checkpoints.py).
            "hypothesis",
            # `make test` runs the suite on both cores (whole files per worker).
            "pytest-xdist",
            "tf-models-official~=2.20.0",
            "tf-keras~=2.20.0",
            "jax",
            # The PyTorch backend's tests (tests/models/test_torch_backend.py,
            # 3 tests, 52 s here): the CPU build, 864 MB, 54 s to install.
            "torch==2.13.0",
            # The ModernBERT peer: its own modelling code writes the random
            # checkpoints our loader is compared with (tests/models/modernbert).
            "transformers==5.24.0",
            # The TF Hub-format export is tested the way the TF Hub tutorials use it.
            "tensorflow-hub",
            # Real multilingual text for the tokenizer parity test (offline).
            "babel",
            "faker",
            # Writes Hugging Face checkpoints in the tests (the peer's own writer);
            # keras-hub's HF loader, the parity peer, reads them with it too.
            "safetensors",
            # Executes the Colab notebooks (colab/*.ipynb) in tests/colab.
            "nbclient",
            "ipykernel",
        ],
    },
    entry_points={
        "console_scripts": ["kerasbert=kerasbert.cli:main"],
    },
)
