"""Shared helpers for the pretraining-data tests: a tiny vocabulary, small
synthetic corpora, and reading shards back."""

import os
import random

import numpy as np

from kerasbert.testing.files import write_vocabulary

# Specials deliberately NOT at the original ids, so nothing may assume them.
SPECIALS = ["[PAD]", "[unused0]", "[UNK]", "[unused1]", "[SEP]", "[MASK]", "[CLS]"]
WORDS = (
    "the a cat dog sat ran on under mat house tree bird sings quickly slowly "
    "big small red green blue river walks talks play ##ing ##ed ##s ##ly un "
    "##happy . , ! ? 한 국 어 영 화 좋 다 요 中 文 字 日 本 語 é"
).split()


def write_vocab(directory):
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    tokens = SPECIALS + letters + ["##" + c for c in letters] + WORDS
    return write_vocabulary(directory, tokens)


SENTENCE_WORDS = (
    "the a cat dog sat ran on under mat house tree bird sings quickly slowly "
    "big small red green blue river walks talks playing played unhappy zebra"
).split()


def sentence(rng, min_words=3, max_words=12):
    n = rng.randint(min_words, max_words)
    return " ".join(rng.choice(SENTENCE_WORDS) for _ in range(n)) + " ."


def write_corpus(path, num_docs, seed=0, max_sentences=10):
    """Original format: one sentence per line, blank line between docs."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(num_docs):
            for _ in range(rng.randint(1, max_sentences)):
                f.write(sentence(rng) + "\n")
            f.write("\n")
    return path


def read_shards(directory, sequence_length, max_predictions, objective="nsp", masked=True):
    """All records of a shard folder -> {feature name: np.ndarray [N, len]}."""
    import tensorflow as tf

    from kerasbert.data import metadata, schema

    meta = metadata.read_metadata(directory)
    files = [os.path.join(directory, name) for name in sorted(meta["shards"])]
    names = schema.feature_names(objective, masked)
    spec = schema.parsing_spec(names, sequence_length, max_predictions)
    ds = tf.data.TFRecordDataset(files, compression_type=meta["compression"] or "")
    ds = ds.batch(4096).map(lambda r: tf.io.parse_example(r, spec))
    out = {name: [] for name in names}
    for batch in ds:
        for name in names:
            out[name].append(batch[name].numpy())
    return {name: np.concatenate(v) for name, v in out.items()}


def shard_bytes(directory):
    return {
        name: open(os.path.join(directory, name), "rb").read()
        for name in sorted(os.listdir(directory))
        if name.startswith("part-")
    }
