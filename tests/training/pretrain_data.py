"""Tiny pretraining inputs for the trainer tests: a learnable synthetic
corpus (sentences from a small grammar), its WordPiece vocabulary, and
pretraining TFRecords written by our own writer."""

import json
import os
import random
import subprocess
import sys

SUBJECTS = "the cat|a dog|the old man|my sister|the small bird|our teacher".split("|")
VERBS = "sees|likes|finds|paints|follows|calls".split("|")
OBJECTS = "the red house|a green tree|the river|a blue car|the garden|an apple".split("|")
ENDINGS = "today|every morning|at night|in the park|with joy|again".split("|")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_corpus(path, num_docs=120, seed=0):
    """Original format; each document follows one subject (so the next
    sentence is predictable from the previous one)."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(num_docs):
            subject = rng.choice(SUBJECTS)
            for _ in range(rng.randint(3, 8)):
                words = [subject, rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(ENDINGS)]
                f.write(" ".join(words).capitalize() + " .\n")
            f.write("\n")
    return path


def make_data(directory, *, sequence_length=32, predictions=5, objective="nsp",
              masking=True, dupe_factor=2, num_shards=2, corpus=None, vocab=None):
    """(vocab.txt, shard folder) under `directory` (reused when present)."""
    from kerasbert.data import create_pretraining_data
    from kerasbert.text import vocabulary, wordpiece_training

    os.makedirs(directory, exist_ok=True)
    corpus = corpus or write_corpus(os.path.join(directory, "corpus.txt"))
    if vocab is None:
        vocab = os.path.join(directory, "vocab.txt")
        if not os.path.exists(vocab):
            vocabulary.write_vocab(wordpiece_training.build_wordpiece_vocab([corpus], 200), vocab)
    out = os.path.join(directory, f"data-{objective}-{sequence_length}-{'m' if masking else 'u'}")
    if not os.path.exists(os.path.join(out, "metadata.json")):
        create_pretraining_data(
            [corpus], vocab, out, sequence_length=sequence_length,
            max_predictions_per_seq=predictions, dupe_factor=dupe_factor,
            objective=objective, masking=masking, num_shards=num_shards, progress=False)
    return vocab, out


def pretrain_args(vocab, data, run_dir, *extra, steps=6, batch_size=8):
    """`kerasbert pretrain` arguments for a 1-layer, width-32 BERT."""
    return ["pretrain", "--preset", "bert_tiny", "--vocab", vocab, "--data", data,
            "--output-dir", run_dir, "--steps", str(steps), "--batch-size", str(batch_size),
            "--set", "num_layers=1", "--set", "hidden_dim=32", "--set", "num_heads=2",
            "--set", "intermediate_dim=64", "--set", "max_sequence_length=64",
            "--learning-rate", "1e-3", "--warmup-steps", "1", "--no-progress",
            *extra]


def history(run_dir):
    """The rows of RUN/history.jsonl, every line parsed (read here, not by
    kerasbert.runs, so that a malformed line fails the test)."""
    with open(os.path.join(run_dir, "history.jsonl")) as f:
        return [json.loads(line) for line in f]


def run_cli(args, env=None, **kwargs):
    """Runs `python -m kerasbert ARGS` in a fresh process."""
    full_env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO, **(env or {}))
    return subprocess.run([sys.executable, "-m", "kerasbert", *args], capture_output=True,
                          text=True, env=full_env, cwd=REPO, **kwargs)
