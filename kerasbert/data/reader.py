"""Pretraining TFRecord reader: `pretraining_dataset` and `verify_shards`.

Reads shards in the original google-research/bert layout (schema.py), ours
or anyone's, and yields batches keyed by the model's input names
(schema.FILE_TO_MODEL):

    input_word_ids       int32   [B, T]
    input_mask           int32   [B, T]
    input_type_ids       int32   [B, T]
    masked_lm_positions  int32   [B, P]
    masked_lm_ids        int32   [B, P]
    masked_lm_weights    float32 [B, P]
    next_sentence_labels int32   [B]   (only when the files hold it)

T = sequence_length, P = max_predictions_per_seq. With `masked_lm=False`
(a causal LM, which predicts every next token) the batches hold the three
sequence features only, with the ORIGINAL tokens (stored masks are undone).

Checks. Token ids (input_ids, masked_lm_ids) must be below metadata.json's
vocab_size, else the model's `vocab_size`, else the size of `vocab_file`; a
record holding another id (or a masked_lm_position outside the sequence) is
reported like a corrupt record, naming the file, the record, the feature and
the value (on a GPU an out-of-range lookup returns zeros: it would train on
garbage silently). A model vocabulary smaller than metadata.json's is
refused up front. Files that certainly hold no record raise
integrity.EmptyDataError (a ValueError) up front; with `repeat`, the
iteration fails with it (carried by a tf.errors.InvalidArgumentError, see
`integrity.data_error`) when a whole pass over the files reads nothing,
instead of spinning forever.
"""

import os

import tensorflow as tf

from kerasbert.data import integrity, metadata, schema
from kerasbert.data.dynamic_masking import DynamicMasker, restore_original_ids
from kerasbert.data.integrity import (  # noqa: F401
    CorruptRecordError, CorruptRecordLog, EmptyDataError)
# The shard files' description lives in shard_files; its public names stay
# importable from here (kerasbert.training.pretrain reads them as reader.*).
from kerasbert.data.shard_files import (  # noqa: F401
    check_not_empty, describe_files, describe_shards, expand_files, file_compression,
    folder_metadata, short_names)

AUTOTUNE = tf.data.AUTOTUNE


def _sentinel(names, sequence_length, max_predictions_per_seq):
    """A serialized all-zero Example with every feature (parses cleanly)."""
    lengths = schema.feature_lengths(names, sequence_length, max_predictions_per_seq)
    feature = {}
    for name in names:
        if schema.FEATURES[name][0] == "float32":
            values = tf.train.FloatList(value=[0.0] * lengths[name])
            feature[name] = tf.train.Feature(float_list=values)
        else:
            values = tf.train.Int64List(value=[0] * lengths[name])
            feature[name] = tf.train.Feature(int64_list=values)
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


# --- the dataset ------------------------------------------------------------


def _value_limits(files, metas, vocab_size, vocab_file):
    """Per file: (token-id limit, where it comes from) for the range check
    of input_ids and masked_lm_ids; -1 when no vocabulary size is known.
    The limit is metadata.json's vocab_size, else `vocab_size` (the
    model's), else the size of `vocab_file`."""
    limits, sources = [], []
    file_size = None
    for f in files:
        folder = os.path.dirname(f)
        meta = metas[folder] or {}
        where = os.path.join(folder, metadata.METADATA_FILE)
        if meta.get("vocab_size") is not None:
            limit, source = int(meta["vocab_size"]), f"vocab_size in {where}"
            if vocab_size is not None and int(vocab_size) < limit:
                raise ValueError(
                    f"{where} says the data was written with a vocabulary of {limit} tokens, "
                    f"but the model's vocabulary has {int(vocab_size)}: ids {int(vocab_size)}.."
                    f"{limit - 1} would be out of range.")
        elif vocab_size is not None:
            limit, source = int(vocab_size), "vocabulary_size of the model"
        elif vocab_file is not None:
            if file_size is None:
                file_size = metadata.vocab_fingerprint(vocab_file)[1]
            limit, source = file_size, f"the size of {vocab_file}"
        else:
            limit, source = -1, ""
        limits.append(limit)
        sources.append(source)
    return limits, sources


def _feature_limits(names, id_limit, id_source, sequence_length):
    """One file's value checks for integrity.checked_records: (feature,
    exclusive int64 limit, where the limit comes from) for the token ids
    (`id_limit`; below 0 only negative ids are refused) and the masked positions
    (the sequence length)."""
    limits = [(name, id_limit, id_source)
              for name in ("input_ids", "masked_lm_ids") if name in names]
    if "masked_lm_positions" in names:
        limits.append(("masked_lm_positions", tf.constant(sequence_length, tf.int64),
                       "max_seq_length"))
    return limits


def _records(files, names, sequence_length, num_pred, compression_of, counts, *, log,
             shuffle, seed, repeat, deterministic, cycle_length, record_shards,
             id_limits, id_sources):
    """Parsed, checked records (dicts of file-named features) interleaved
    over `files`; repeated when `repeat` (failing, instead of spinning,
    when a whole pass over the files yields no record).

    The files travel through the pipeline as indices into `files`, never as
    paths: a checkpointed iterator then holds no path, so a run resumes from
    another working directory or with the data folder moved elsewhere."""
    compressions = {compression_of[f] for f in files}
    if len(compressions) > 1:
        raise ValueError("Mixing gzip and plain files in one dataset is not supported.")
    compression = compressions.pop()
    spec = schema.parsing_spec(names, sequence_length, num_pred)
    sentinel = _sentinel(names, sequence_length, num_pred)
    sizes, moduli = zip(*(integrity.expected_stream_bytes(f, compression) for f in files))
    num_shards, shard = record_shards
    paths = tf.constant(files)
    sizes = tf.constant(sizes, tf.int64)
    counts_t = tf.constant([counts[f] for f in files], tf.int64)
    id_limits = tf.constant(id_limits, tf.int64)
    id_sources = tf.constant(id_sources)

    def read_file(index):
        path = tf.gather(paths, index)
        limits = _feature_limits(names, tf.gather(id_limits, index),
                                 tf.gather(id_sources, index), sequence_length)
        return integrity.checked_records(
            path, lambda record: tf.io.parse_single_example(record, spec), sentinel,
            compression=compression, expected_bytes=tf.gather(sizes, index),
            modulus=moduli[0], expected_count=tf.gather(counts_t, index), log=log,
            batch_parse_fn=lambda records: tf.io.parse_example(records, spec),
            chunk_shards=(num_shards, shard % num_shards), value_limits=limits)

    file_ds = tf.data.Dataset.range(len(files))
    if shuffle:
        file_ds = file_ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    records = file_ds.interleave(
        read_file, cycle_length=min(cycle_length, len(files)), block_length=1,
        num_parallel_calls=AUTOTUNE, deterministic=deterministic)
    if not repeat:
        return records
    # Repeat passes over the files, not records: the record shuffle buffer
    # then never drains at an epoch boundary. A pass that reads nothing
    # (empty or wholly skipped files, a pipeline left without chunks) stops
    # the iteration with an EmptyDataError instead of spinning.
    where = f" (input pipeline {shard} of {num_shards})" if num_shards > 1 else ""
    message = (f"no records: a whole pass over {short_names(files)}{where} read none "
               "(empty files, or every record skipped as corrupt).")
    marker = tf.io.parse_single_example(sentinel, spec)
    return integrity.empty_pass_check(records, marker, message)


def _to_model_fn(names, masker, masked_lm=True):
    """(file-named batch, batch seed) -> model-named batch (int32 ids,
    [B] sentence labels), re-masked when `masker` is given; without
    `masked_lm`, unmasked and without masked_lm_* features."""
    masked = all(n in names for n in schema.MASKED_LM_FEATURES)

    def to_model(batch, batch_seed):
        out = {schema.FILE_TO_MODEL[n]: batch[n] for n in names}
        for name in ("input_word_ids", "input_mask", "input_type_ids",
                     "masked_lm_positions", "masked_lm_ids"):
            if name in out:
                out[name] = tf.cast(out[name], tf.int32)
        if "next_sentence_labels" in out:
            out["next_sentence_labels"] = tf.cast(out["next_sentence_labels"][:, 0], tf.int32)
        if masker is not None:
            ids = out["input_word_ids"]
            if masked:  # undo the stored masks before drawing new ones
                ids = restore_original_ids(ids, out["masked_lm_positions"],
                                           out["masked_lm_ids"], out["masked_lm_weights"])
            out.update(masker(ids, out["input_mask"], tf.stack([batch_seed, 7])))
        if not masked_lm:
            if masked:  # the causal LM reads the original tokens
                out["input_word_ids"] = restore_original_ids(
                    out["input_word_ids"], out["masked_lm_positions"],
                    out["masked_lm_ids"], out["masked_lm_weights"])
            for name in schema.MASKED_LM_FEATURES:
                out.pop(schema.FILE_TO_MODEL[name], None)
        return out

    return to_model


def _check_options(on_corrupt, dynamic_masking, masked_lm, vocab_file):
    """Refuses option combinations pretraining_dataset cannot serve."""
    if on_corrupt not in ("raise", "skip"):
        raise ValueError(f"on_corrupt must be 'raise' or 'skip', got {on_corrupt!r}.")
    if dynamic_masking and not masked_lm:
        raise ValueError("dynamic_masking=True and masked_lm=False exclude each other.")
    if dynamic_masking and vocab_file is None:
        raise ValueError("dynamic_masking=True needs vocab_file (special token ids "
                         "are looked up in it).")


def _described_files(file_pattern, sequence_length, max_predictions_per_seq, vocab_file,
                     needs_stored_masks):
    """(files, describe_files' tuple) for a pattern, refusing files that
    hold no record, or no masks when `needs_stored_masks`."""
    files = expand_files(file_pattern)
    check_not_empty(files)
    described = describe_files(files, sequence_length, max_predictions_per_seq, vocab_file)
    masked = all(n in described[0] for n in schema.MASKED_LM_FEATURES)
    if not masked and needs_stored_masks:
        raise ValueError(
            f"{files[0]} holds no masked_lm_* features (written for dynamic "
            "masking, --no-masking); pass dynamic_masking=True and vocab_file."
        )
    return files, described


def _pipeline_share(files, batch_size, seed, input_context):
    """This input pipeline's share: (files, per-pipeline batch size, seed,
    (record shards, pipeline id)). With at least as many files as pipelines
    each pipeline reads every num_pipelines-th file, else all files and
    every num_pipelines-th chunk of records; seeds differ per pipeline."""
    pipeline_id, num_pipelines = 0, 1
    if input_context is not None:
        pipeline_id = input_context.input_pipeline_id
        num_pipelines = input_context.num_input_pipelines
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    record_shards = 1
    if num_pipelines > 1:
        if len(files) >= num_pipelines:
            files = files[pipeline_id::num_pipelines]
        else:
            record_shards = num_pipelines
    if seed is not None:
        seed = int(seed) + 1000003 * pipeline_id
    return files, batch_size, seed, (record_shards, pipeline_id)


def _skip_log(on_corrupt, corrupt_log, max_corrupt_records):
    """The CorruptRecordLog that counts skipped records; None in raise mode."""
    if on_corrupt != "skip":
        return None
    log = corrupt_log if corrupt_log is not None else CorruptRecordLog()
    log.max_corrupt_records = max_corrupt_records
    return log


def _model_batches(ds, names, *, dynamic_masking, masked_lm, vocab_file, num_pred,
                   masked_lm_prob, whole_word_mask, seed, deterministic):
    """File-named batches -> model-named ones (module docstring), with
    masks drawn per batch under dynamic masking; prefetched."""
    masker = None
    if dynamic_masking:
        masker = DynamicMasker.from_vocab_file(
            vocab_file, num_pred, masked_lm_prob=masked_lm_prob,
            whole_word_mask=whole_word_mask)
        # One int64 per batch seeds its masks; rerandomize_each_iteration
        # gives new masks each epoch (also when model.fit re-iterates a
        # finite dataset), reproducible for a fixed seed.
        seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
        ds = tf.data.Dataset.zip(ds, seeds)
    else:
        ds = ds.map(lambda batch: (batch, tf.constant(0, tf.int64)))
    to_model = _to_model_fn(names, masker, masked_lm)
    ds = ds.map(to_model, num_parallel_calls=AUTOTUNE, deterministic=deterministic)
    options = tf.data.Options()
    options.deterministic = deterministic
    ds = ds.with_options(options)
    return ds.prefetch(AUTOTUNE)


def pretraining_dataset(
    file_pattern, batch_size, *, dynamic_masking=False, masked_lm=True, input_context=None,
    shuffle=True, seed=None, repeat=True, deterministic=False, vocab_file=None,
    vocab_size=None, sequence_length=None, max_predictions_per_seq=None, masked_lm_prob=0.15,
    whole_word_mask=False, shuffle_buffer_size=10000, cycle_length=8, on_corrupt="raise",
    max_corrupt_records=0, corrupt_log=None,
):
    """A `tf.data.Dataset` of pretraining batches (see the module docstring).

    Args:
        file_pattern: glob string, file, shard folder (the files its
            metadata.json lists), or a list of them; `.gz` files or
            metadata `compression: "GZIP"` are read as gzip.
        batch_size: the GLOBAL batch size; with `input_context` each pipeline
            batches `input_context.get_per_replica_batch_size(batch_size)`.
        dynamic_masking: draw masks in tf.data (new ones every epoch, also
            for a non-repeating dataset re-iterated by `model.fit`). Needs
            `vocab_file` (special ids are looked up by string). Works on
            `--no-masking` files; on statically masked files the stored
            masks are first undone (masked_lm_ids put back at their
            positions) and fresh masks drawn. `whole_word_mask=True` masks
            whole words ("##" pieces from vocab_file) in dynamic masking.
        masked_lm: False for models that need no masked-LM features (the
            causal LM, whose pretrainer says so with `needs_masked_lm =
            False`): no masks are drawn, stored ones are undone, and the
            batches carry no masked_lm_* features. Excludes
            dynamic_masking.
        input_context: `tf.distribute.InputContext`. Files are split between
            input pipelines when there are at least as many files as
            pipelines, else records, in chunks of 64 consecutive records
            (chunk k of every file goes to pipeline k % num_input_pipelines).
        shuffle: shuffle files and records (buffer `shuffle_buffer_size`).
        seed: seeds file/record shuffling and the masks.
        repeat: repeat forever; batches then drop the remainder.
        deterministic: fixed order (and masks, given `seed`) every run; off,
            parallel reads may reorder elements for speed.
        vocab_file: checked against metadata.json's vocab_sha256/vocab_size.
        vocab_size: the model's vocabulary size, a limit for the token
            ids (module docstring, Checks).
        sequence_length, max_predictions_per_seq: checked against
            metadata.json; required for files without it.
        on_corrupt: "raise" (default): a corrupt or truncated record fails
            the iteration with an error naming the file and record index.
            "skip": such records are logged and counted in `corrupt_log`
            (a CorruptRecordLog), failing past `max_corrupt_records`.

    Raises:
        integrity.EmptyDataError on empty files (module docstring, Checks).
    """
    _check_options(on_corrupt, dynamic_masking, masked_lm, vocab_file)
    files, (names, sequence_length, num_pred, compression_of, counts) = _described_files(
        file_pattern, sequence_length, max_predictions_per_seq, vocab_file,
        needs_stored_masks=masked_lm and not dynamic_masking)
    files, batch_size, seed, record_shards = _pipeline_share(files, batch_size, seed,
                                                             input_context)
    check_not_empty(files, compression_of, counts, record_shards)
    id_limits, id_sources = _value_limits(files, folder_metadata(files), vocab_size,
                                          vocab_file)
    log = _skip_log(on_corrupt, corrupt_log, max_corrupt_records)
    ds = _records(files, names, sequence_length, num_pred, compression_of, counts, log=log,
                  shuffle=shuffle, seed=seed, repeat=repeat, deterministic=deterministic,
                  cycle_length=cycle_length, record_shards=record_shards,
                  id_limits=id_limits, id_sources=id_sources)
    if shuffle:
        ds = ds.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size, drop_remainder=repeat)
    return _model_batches(ds, names, dynamic_masking=dynamic_masking, masked_lm=masked_lm,
                          vocab_file=vocab_file, num_pred=num_pred,
                          masked_lm_prob=masked_lm_prob, whole_word_mask=whole_word_mask,
                          seed=seed, deterministic=deterministic)


def verify_shards(file_pattern, sequence_length=None, max_predictions_per_seq=None,
                  vocab_size=None):
    """Scans every file; returns a list of integrity.ShardReport (file,
    records, corrupt [(index, cause)], first_corrupt_index, ok).

    With metadata.json (or both sizes given) records are also parsed against
    the schema, and token ids checked against metadata.json's vocab_size
    (or `vocab_size`); otherwise only the TFRecord framing and "is an
    Example" are checked."""
    files = expand_files(file_pattern)
    metas = folder_metadata(files)
    try:
        names, sequence_length, num_pred, compression_of, counts = describe_files(
            files, sequence_length, max_predictions_per_seq)
    except ValueError as err:
        if "no metadata.json" not in str(err) and "No readable record" not in str(err):
            raise
        names = None
        compression_of = {f: file_compression(f, metas[os.path.dirname(f)]) for f in files}
        counts = {f: -1 for f in files}
    parse_fn = sentinel = batch_parse_fn = None
    limits = {f: () for f in files}
    if names is not None:
        spec = schema.parsing_spec(names, sequence_length, num_pred)
        parse_fn = lambda record: tf.io.parse_single_example(record, spec)  # noqa: E731
        batch_parse_fn = lambda records: tf.io.parse_example(records, spec)  # noqa: E731
        sentinel = _sentinel(names, sequence_length, num_pred)
        id_limits, id_sources = _value_limits(files, metas, vocab_size, None)
        for f, limit, source in zip(files, id_limits, id_sources):
            limits[f] = _feature_limits(names, tf.constant(limit, tf.int64), source,
                                        sequence_length)
    return [
        integrity.verify_file(f, parse_fn, sentinel, compression_of[f], counts[f],
                              batch_parse_fn, limits[f])
        for f in files
    ]
