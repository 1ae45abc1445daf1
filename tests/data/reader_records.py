"""Helpers for the reader tests: a tiny vocabulary in the original BERT
layout and TFRecord shards written directly with tf.train.Example (the
schema.py names), independent of our writer."""

import os

import numpy as np
import tensorflow as tf

from kerasbert.data import metadata, schema

PAD, UNK, CLS, SEP, MASK = 0, 100, 101, 102, 103
WORDS = [f"w{i}" for i in range(400)]


def write_vocab(path):
    """Original layout: [PAD]=0, [unused*], [UNK]=100, [CLS]=101, [SEP]=102,
    [MASK]=103, then words; returns the vocabulary size."""
    tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(99)]
    tokens += ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")
    return len(tokens)


def make_instances(n, sequence_length=32, num_pred=5, masked=True, nsp=True, seed=0,
                   vocab_size=504, min_len=8):
    """n feature dicts: [CLS] a [SEP] b [SEP], random lengths, 0-padded.
    Masked instances carry a static mask ([MASK] at each position)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        length = int(rng.integers(min_len, sequence_length + 1))
        body = rng.integers(104, vocab_size, size=length - 3)
        cut = int(rng.integers(1, len(body)))
        ids = [CLS, *body[:cut], SEP, *body[cut:], SEP]
        segments = [0] * (cut + 2) + [1] * (length - cut - 2)
        pad = sequence_length - length
        inst = {
            "input_ids": ids + [PAD] * pad,
            "input_mask": [1] * length + [0] * pad,
            "segment_ids": segments + [0] * pad,
        }
        if masked:
            maskable = [i for i, t in enumerate(ids) if t not in (CLS, SEP)]
            k = min(num_pred, max(1, round(len(ids) * 0.15)))
            pos = sorted(rng.choice(maskable, size=k, replace=False).tolist())
            orig = [inst["input_ids"][p] for p in pos]
            for p in pos:
                inst["input_ids"][p] = MASK
            inst["masked_lm_positions"] = pos + [0] * (num_pred - k)
            inst["masked_lm_ids"] = orig + [0] * (num_pred - k)
            inst["masked_lm_weights"] = [1.0] * k + [0.0] * (num_pred - k)
        if nsp:
            inst["next_sentence_labels"] = [int(rng.integers(0, 2))]
        out.append(inst)
    return out


def serialize(inst):
    feature = {}
    for name, values in inst.items():
        if schema.FEATURES[name][0] == "float32":
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
        else:
            feature[name] = tf.train.Feature(
                int64_list=tf.train.Int64List(value=[int(v) for v in values]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_records(path, records, gzip=False):
    options = tf.io.TFRecordOptions("GZIP") if gzip else None
    with tf.io.TFRecordWriter(path, options) as writer:
        for record in records:
            writer.write(record if isinstance(record, bytes) else serialize(record))


def write_shards(directory, instances, num_shards=2, sequence_length=32, num_pred=5,
                 with_metadata=True, vocab_file=None, gzip=False):
    """Round-robin shards + (optionally) metadata.json; returns the paths."""
    os.makedirs(directory, exist_ok=True)
    suffix = ".tfrecord.gz" if gzip else ".tfrecord"
    paths = [os.path.join(directory, f"part-{i:05d}{suffix}") for i in range(num_shards)]
    for i, path in enumerate(paths):
        write_records(path, instances[i::num_shards], gzip=gzip)
    if with_metadata:
        names = list(instances[0])
        meta = {
            "schema_version": schema.SCHEMA_VERSION,
            "features": schema.describe_features(names, sequence_length, num_pred),
            "max_seq_length": sequence_length,
            "max_predictions_per_seq": num_pred,
            "objective": "nsp" if "next_sentence_labels" in names else "none",
            "masking": "static" if "masked_lm_ids" in names else "dynamic",
            "shards": {os.path.basename(p): len(instances[i::num_shards])
                       for i, p in enumerate(paths)},
            "num_instances": len(instances),
            "compression": "GZIP" if gzip else None,
        }
        if vocab_file:
            meta["vocab_sha256"], meta["vocab_size"] = metadata.vocab_fingerprint(vocab_file)
        metadata.write_metadata(directory, meta)
    return paths
