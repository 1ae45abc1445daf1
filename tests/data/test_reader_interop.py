"""Reader interop (subprocesses): files written by tf-models-official's
create_pretraining_data.py read by pretraining_dataset, and per-replica
batches under MirroredStrategy over 2 logical CPUs."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import reader_records as rr
from kerasbert.data.reader import pretraining_dataset

T, P = 32, 5


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("vocab") / "vocab.txt")
    rr.write_vocab(path)
    return path


def _collect(ds):
    return [{k: v.numpy() for k, v in batch.items()} for batch in ds]


def test_reads_tf_models_official_create_pretraining_data(tmp_path, vocab):
    """A file written by Model Garden's create_pretraining_data.py (run as a
    subprocess on a tiny corpus) reads with the right shapes and values."""
    rng = np.random.default_rng(0)
    lines = []
    for _ in range(12):
        for _ in range(6):
            lines.append(" ".join(rng.choice(rr.WORDS, size=rng.integers(3, 12))))
        lines.append("")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n")
    out = tmp_path / "mg" / "out.tfrecord"
    out.parent.mkdir()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    subprocess.run(
        [sys.executable, "-m", "official.nlp.data.create_pretraining_data",
         f"--input_file={corpus}", f"--output_file={out}", f"--vocab_file={vocab}",
         f"--max_seq_length={T}", f"--max_predictions_per_seq={P}", "--dupe_factor=1",
         "--random_seed=3"],
        check=True, env=env, capture_output=True, timeout=240,
    )
    raw = [tf.train.Example.FromString(r.numpy())
           for r in tf.data.TFRecordDataset(str(out))]
    assert raw, "Model Garden wrote no instances"
    ds = pretraining_dataset(str(out), 4, shuffle=False, repeat=False, deterministic=True,
                             sequence_length=T, max_predictions_per_seq=P)
    batches = _collect(ds)
    got = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
    assert got["input_word_ids"].shape == (len(raw), T)
    assert got["masked_lm_ids"].shape == (len(raw), P)

    def feature(name):
        f = [e.features.feature[name] for e in raw]
        kind = f[0].WhichOneof("kind")
        return np.array([list(getattr(x, kind).value) for x in f])

    np.testing.assert_array_equal(got["input_word_ids"], feature("input_ids"))
    np.testing.assert_array_equal(got["input_type_ids"], feature("segment_ids"))
    np.testing.assert_array_equal(got["masked_lm_positions"], feature("masked_lm_positions"))
    np.testing.assert_array_equal(got["masked_lm_ids"], feature("masked_lm_ids"))
    np.testing.assert_allclose(got["masked_lm_weights"], feature("masked_lm_weights"))
    np.testing.assert_array_equal(got["next_sentence_labels"],
                                  feature("next_sentence_labels")[:, 0])
    # Their masks follow the same conventions: [MASK]=103 mostly at positions.
    weights = got["masked_lm_weights"] > 0
    at = np.take_along_axis(got["input_word_ids"], got["masked_lm_positions"], 1)[weights]
    assert (at == rr.MASK).mean() > 0.6
    assert got["input_word_ids"][:, 0].tolist() == [rr.CLS] * len(raw)


_MIRRORED = """
import sys, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from kerasbert.data.reader import pretraining_dataset
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
dist = strategy.distribute_datasets_from_function(
    lambda ctx: pretraining_dataset(sys.argv[1], 8, input_context=ctx, seed=1,
                                    shuffle_buffer_size=16))
batch = next(iter(dist))
shapes = [tuple(t.shape) for t in strategy.experimental_local_results(batch["input_word_ids"])]
assert shapes == [(4, 32), (4, 32)], shapes
print("OK")
"""


def test_mirrored_strategy_per_replica_batches(tmp_path):
    # DESIGN §6: MirroredStrategy over 2 logical CPUs; global batch 8 -> 4 per replica.
    rr.write_shards(str(tmp_path), rr.make_instances(40, T, P), num_shards=2)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    result = subprocess.run([sys.executable, "-c", _MIRRORED, str(tmp_path / "*.tfrecord")],
                            env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0 and "OK" in result.stdout, result.stderr[-2000:]
