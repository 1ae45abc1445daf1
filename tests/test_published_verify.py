"""kerasbert.testing.published.verify: a damaged or incomplete cache of the
published checkpoint is refused in one line, never tested against."""

import dataclasses
import hashlib

import pytest

from kerasbert.io_utils import file_sha256
from kerasbert.testing.published import PACKAGES
from kerasbert.testing.published import CheckpointUnavailable
from kerasbert.testing.published import verify

WEIGHTS = b"\x00\x01published weights\xff" * 300_000  # > one 4 MiB read block


def _cache(tmp_path, weights=WEIGHTS):
    spec = dataclasses.replace(PACKAGES["all-minilm-l6-v2"],
                               sha256=hashlib.sha256(WEIGHTS).hexdigest())
    for name in spec.files:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(weights if name == "model.safetensors" else b"{}")
    return spec


def test_file_sha256_reads_in_blocks_and_equals_hashlib(tmp_path):
    path = tmp_path / "w.bin"
    path.write_bytes(WEIGHTS)
    assert len(WEIGHTS) > 1 << 22
    assert file_sha256(path) == hashlib.sha256(WEIGHTS).hexdigest()


def test_the_published_weights_pass(tmp_path):
    spec = _cache(tmp_path)
    assert file_sha256(tmp_path / "model.safetensors") == spec.sha256
    assert verify(str(tmp_path), spec) is None  # no CheckpointUnavailable


def test_damaged_weights_are_refused_naming_both_digests(tmp_path):
    damaged = bytearray(WEIGHTS)
    damaged[-1] ^= 1
    spec = _cache(tmp_path, bytes(damaged))
    with pytest.raises(CheckpointUnavailable) as err:
        verify(str(tmp_path), spec)
    message = str(err.value)
    assert "\n" not in message and spec.package in message
    assert hashlib.sha256(bytes(damaged)).hexdigest() in message and spec.sha256 in message


def test_a_missing_file_is_refused_by_name(tmp_path):
    spec = _cache(tmp_path)
    (tmp_path / "1_Pooling" / "config.json").unlink()
    with pytest.raises(CheckpointUnavailable, match=r"lacks 1_Pooling/config\.json"):
        verify(str(tmp_path), spec)
