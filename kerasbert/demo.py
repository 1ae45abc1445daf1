"""`make demo` / `kerasbert demo`: what the library does so far, offline.

Builds presets, runs a padded batch through BERT, proves weight parity with
keras-hub and Model Garden-style checkpoints, saves and reloads. Every step
prints what it checked; any mismatch raises, so the demo fails loudly.
"""

import os
import time

import numpy as np


def _step(title):
    print(f"\n== {title}")


def _batch(vocabulary_size, batch=4, length=16, seed=0):
    """Random ids with real padding: row i keeps length - 3*i tokens."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocabulary_size, (batch, length), dtype="int32")
    mask = np.zeros((batch, length), "int32")
    for i in range(batch):
        mask[i, : max(1, length - 3 * i)] = 1
    ids = ids * mask
    type_ids = np.zeros_like(ids)
    type_ids[:, length // 2 :] = 1
    return {
        "input_word_ids": ids,
        "input_mask": mask,
        "input_type_ids": type_ids * mask,
    }


def _max_diff(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))


def run_demo(output_dir="runs/demo"):
    import keras
    import keras_hub

    from kerasbert import convert
    from kerasbert.cli import describe_backbone
    from kerasbert.models import BertBackbone
    from kerasbert.models import list_presets

    os.makedirs(output_dir, exist_ok=True)
    _step(f"{len(list_presets())} presets (architectures; no download)")
    print(", ".join(list_presets()))
    for name in ("bert_base", "bert_large"):
        start = time.perf_counter()
        count = BertBackbone.from_preset(name).count_params()
        print(f"{name}: {count:,} parameters ({time.perf_counter() - start:.1f}s)")

    _step("bert_tiny forward pass on a padded batch")
    backbone = BertBackbone.from_preset("bert_tiny")
    print(describe_backbone(backbone))
    inputs = _batch(backbone.vocabulary_size)
    outputs = backbone(inputs)
    for key, value in outputs.items():
        shapes = [tuple(v.shape) for v in value] if isinstance(value, list) else tuple(value.shape)
        print(f"  {key}: {shapes}")
    print(f"  real tokens per row: {inputs['input_mask'].sum(1).tolist()}")

    _step("parity with keras-hub's BertBackbone (same weights)")
    peer = keras_hub.models.BertBackbone(
        vocabulary_size=1000, num_layers=2, num_heads=2, hidden_dim=64,
        intermediate_dim=256, max_sequence_length=64,
    )
    ours = convert.from_keras_hub(peer)
    small = _batch(1000)
    expected = peer({
        "token_ids": small["input_word_ids"],
        "padding_mask": small["input_mask"],
        "segment_ids": small["input_type_ids"],
    })
    got = ours(small)
    for key in ("sequence_output", "pooled_output"):
        diff = _max_diff(expected[key], got[key])
        print(f"  {key}: max |ours - keras-hub| = {diff:.2e}")
        if diff > 1e-5:
            raise AssertionError(f"{key} differs from keras-hub by {diff}")

    _step("save and reload (.keras, safe mode)")
    path = os.path.join(output_dir, "bert_tiny.keras")
    backbone.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    diff = _max_diff(outputs["sequence_output"], restored(inputs)["sequence_output"])
    print(f"  {path}: reloaded, max difference {diff:.1e}")
    if diff > 0:
        raise AssertionError("reloaded model differs")

    if hasattr(convert, "save_bert_checkpoint"):
        _step("original google-research/bert checkpoint layout round trip")
        prefix = os.path.join(output_dir, "tf1", "bert_model.ckpt")
        convert.save_bert_checkpoint(backbone, prefix)
        loaded = convert.load_bert_checkpoint(
            prefix, os.path.join(os.path.dirname(prefix), "bert_config.json")
        )
        diff = _max_diff(outputs["pooled_output"], loaded(inputs)["pooled_output"])
        print(f"  wrote {prefix}.index/.data-*, bert_config.json; reloaded, "
              f"max difference {diff:.1e}")
        if diff > 1e-6:
            raise AssertionError("checkpoint round trip changed the model")

    print("\nDemo finished: every check passed.")
