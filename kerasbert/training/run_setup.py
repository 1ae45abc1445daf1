"""The steps `kerasbert pretrain` (pretrain.py) and `kerasbert distill`
(distill.py) share, each stated once:

    data_description      the --data files' shapes and objective, checked
                          against --vocab (before any model is built)
    start_strategy        CPU split, determinism, seeds, the strategy, and
                          the batch size against its replicas
    run_optimizer         the optimizer of the run's options
    pretraining_batches   the tf.data pipeline of pretraining batches
    log_row               one logged metrics row: history.jsonl + TensorBoard
    save_outputs          backbone.keras, pretrainer.keras, the curve
"""

import dataclasses
import os

import keras
import numpy as np
import tensorflow as tf

from kerasbert import runs
from kerasbert.data import pretraining_dataset
from kerasbert.data import reader
from kerasbert.data.metadata import read_metadata
from kerasbert.data.metadata import vocab_fingerprint
from kerasbert.errors import UsageError
from kerasbert.optimizers.optimizer_options import OptimizerOptions
from kerasbert.training.strategies import resolve_strategy
from kerasbert.training.strategies import split_cpu


def data_description(config):
    """(metadata or None, sequence_length, max_predictions_per_seq, objective,
    stored masks?) of the --data files, checked against the vocabulary."""
    try:
        files = reader.expand_files(config.data)
        # Nothing to train on: refused here, before the model is built
        # (a repeated empty dataset would spin forever).
        reader.check_not_empty(files)
        meta = read_metadata(os.path.dirname(files[0]))
    except ValueError as err:
        raise UsageError(f"--data {config.data!r}: {err}") from None
    fingerprint = vocab_fingerprint(config.vocab)  # an unreadable --vocab fails here
    if meta is None:
        return _described_without_metadata(config, files)
    _check_vocabulary(config, meta, fingerprint)
    # (the option, its flag, metadata.json's field)
    for name, flag, key in (("sequence_length", "--max-seq-length", "max_seq_length"),
                            ("max_predictions_per_seq", "--max-predictions-per-seq",
                             "max_predictions_per_seq")):
        given = getattr(config, name)
        if given is not None and given != meta[key]:
            raise UsageError(f"{flag} {given} differs from the data's metadata.json "
                             f"({meta[key]}).")
    return (meta, meta["max_seq_length"], meta["max_predictions_per_seq"], meta["objective"],
            meta.get("masking", "static") == "static")


def _described_without_metadata(config, files):
    """`data_description` of records without metadata.json: the shapes
    come from the flags, the objective from the features stored."""
    if not (config.sequence_length and config.max_predictions_per_seq):
        raise UsageError(f"{os.path.dirname(files[0])} has no metadata.json: pass "
                         "--max-seq-length and --max-predictions-per-seq.")
    try:
        names = reader.describe_files(files, config.sequence_length,
                                      config.max_predictions_per_seq)[0]
    except ValueError as err:  # not pretraining records, none readable, ...
        raise UsageError(f"--data {config.data!r}: {err}") from None
    objective = "nsp" if "next_sentence_labels" in names else "none"
    return None, config.sequence_length, config.max_predictions_per_seq, objective, True


def _check_vocabulary(config, meta, fingerprint):
    """The data was written with --vocab (its size and sha256, when recorded;
    `fingerprint`: --vocab's (sha256, size))."""
    sha, vocab_size = fingerprint
    if meta.get("vocab_size") is not None and meta["vocab_size"] != vocab_size:
        raise UsageError(f"--data was written with a vocabulary of {meta['vocab_size']} tokens "
                         f"but --vocab {config.vocab} has {vocab_size}.")
    if meta.get("vocab_sha256") and meta["vocab_sha256"] != sha:
        raise UsageError(f"--data was written with a different vocabulary (sha256 "
                         f"{meta['vocab_sha256'][:12]}...) than --vocab {config.vocab} "
                         f"(sha256 {sha[:12]}...).")


def dummy_batch(sequence_length, num_predictions, with_sentence):
    """One all-zero pretraining batch [1, T] / [1, P] that builds a
    pretrainer's variables before its weights are restored or copied."""
    batch = {
        "input_word_ids": np.zeros((1, sequence_length), "int32"),
        "input_mask": np.ones((1, sequence_length), "int32"),
        "input_type_ids": np.zeros((1, sequence_length), "int32"),
        "masked_lm_positions": np.zeros((1, num_predictions), "int32"),
        "masked_lm_ids": np.zeros((1, num_predictions), "int32"),
        "masked_lm_weights": np.ones((1, num_predictions), "float32"),
    }
    if with_sentence:
        batch["next_sentence_labels"] = np.zeros((1,), "int32")
    return batch


def start_strategy(config):
    """The process set up for a run (logical CPUs, op determinism, seeds)
    and its `tf.distribute` strategy; UsageError when --batch-size does not
    split evenly over the strategy's replicas."""
    split_cpu(config.logical_cpus)
    if config.deterministic:
        tf.config.experimental.enable_op_determinism()
    keras.utils.set_random_seed(config.seed)
    strategy = resolve_strategy(config.strategy, config.tpu)
    replicas = strategy.num_replicas_in_sync
    if config.batch_size % replicas:
        raise UsageError(f"--batch-size {config.batch_size} is not divisible by the "
                         f"{replicas} replicas of the strategy.")
    return strategy


def run_optimizer(config, **changes):
    """The pretrain recipe's optimizer from the run's options (`changes`:
    `OptimizerOptions` fields the run sets itself, e.g. clipnorm=None when
    its training step clips)."""
    options = OptimizerOptions(
        learning_rate=config.learning_rate, num_train_steps=config.steps,
        warmup_steps=config.warmup(), optimizer=config.optimizer,
        weight_decay=config.weight_decay, end_learning_rate=config.end_learning_rate,
        # kerasbert's optimizers clip the gradient summed over replicas.
        power=config.power, clipnorm=config.clipnorm or None)
    return dataclasses.replace(options, **changes).build()


def pretraining_batches(config, sequence_length, num_predictions, *, dynamic, seed, **options):
    """The run's pretraining batches (`kerasbert.data.pretraining_dataset`;
    `options`: its other arguments, e.g. input_context, masked_lm); a pass
    that finds no records is a UsageError naming --data."""
    try:
        return pretraining_dataset(
            config.data, config.batch_size, dynamic_masking=dynamic, seed=seed,
            deterministic=config.deterministic, vocab_file=config.vocab,
            sequence_length=sequence_length, max_predictions_per_seq=num_predictions,
            **options)
    except reader.EmptyDataError as err:
        raise UsageError(f"--data {config.data!r}: {err}") from None


def log_row(row, step, optimizer, sequences, elapsed, history, tensorboard):
    """`row` (metric -> mean over the logged window) with the step, the
    learning rate and the throughput (`sequences` in `elapsed` seconds),
    appended to history.jsonl and written to TensorBoard; returns it."""
    row["step"] = step
    row["learning_rate"] = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
    row["sequences_per_second"] = sequences / max(elapsed, 1e-9)
    history.append(row)
    tensorboard.write(step, {k: v for k, v in row.items() if k != "step"})
    return row


def save_outputs(output_dir, backbone, pretrainer):
    """Writes RUN/backbone.keras, RUN/pretrainer.keras and the training
    curve; returns {name: path} of them and of the TensorBoard logs."""
    saved = runs.save_run(output_dir, {runs.BACKBONE: backbone, runs.PRETRAINER: pretrainer})
    outputs = {"backbone": saved[runs.BACKBONE], "pretrainer": saved[runs.PRETRAINER]}
    curve = runs.plot_training_curve(output_dir)
    if curve:
        outputs["training_curve"] = curve
    outputs["logs"] = runs.run_path(output_dir, runs.LOGS)
    return outputs
