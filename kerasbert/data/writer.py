"""Streaming, parallel, atomic pretraining-data writer.

Pipeline (bounded memory at every stage):

    chunks.input_chunks            each input's documents, in chunks of
                                   <= CHUNK_DOCS documents / CHUNK_BYTES
      -> worker processes: chunks.ChunkMaker (tokenize the whole chunk in
         one tensorflow-text call, make instances, serialize, and frame
         them as TFRecords: length + crc32c)
      -> main process, in chunk order: a bounded shuffle buffer, then
         round-robin over `num_shards` shards written under temporary names.

This is the `--runner local` driver; `kerasbert.data.beam_writer` runs the
same chunks through an Apache Beam pipeline for corpora that outgrow one
machine, and writes the same multiset of records.

The main process never imports TensorFlow when there are worker processes:
it reads text, shuffles and writes bytes. TensorFlow is imported once, in
a forkserver that forks the workers (`_start_pool`).

Determinism: chunking depends only on each input, each chunk's RNG is
seeded from random_seed and the chunk's text (`chunks.chunk_rng`) and the
shuffle buffer from random_seed, so a fixed seed gives identical bytes for
ANY number of workers (and the same records in any input order).

Atomicity: shards are written as `.part-*.tmp` and renamed only after every
shard is complete; metadata.json is written last (atomically). A failure or
interrupt removes the temporaries and leaves earlier output untouched.
"""

import collections
import importlib.util
import multiprocessing
import os
import time

import numpy as np

from kerasbert.data import metadata as meta_lib
from kerasbert.data.chunks import ChunkMaker
from kerasbert.data.chunks import input_chunks
from kerasbert.data.chunks import split_framed
from kerasbert.data.pretraining_run import RUNNERS
from kerasbert.data.pretraining_run import Run
from kerasbert.data.pretraining_run import check_output_dir
from kerasbert.data.pretraining_run import check_produced
from kerasbert.data.pretraining_run import final_files
from kerasbert.data.pretraining_run import shard_name
from kerasbert.data.text_input import check_inputs
from kerasbert.data.text_input import check_text_files
from kerasbert.data.text_input import expand_inputs
from kerasbert.errors import UsageError

SHUFFLE_BUFFER = 10_000


def _remove_if_empty(folder):
    """Removes a folder this run created, when a failure left it empty."""
    try:
        os.rmdir(folder)
    except OSError:
        pass


# ---------------------------------------------------------------- workers


_STATE = {}  # Per worker process: its ChunkMaker.


def _init_worker(config, in_pool=False):
    _STATE.clear()
    if in_pool:
        import tensorflow as tf

        # One thread per pool worker: the processes already fill the cores,
        # and TF's idle pool threads spin, stealing CPU from the others.
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    _STATE["maker"] = ChunkMaker(config)


def _process_chunk(documents):
    """[[sentence str]] -> (n_docs, framed records as one bytes object,
    [framed size of each record])."""
    return (len(documents), *_STATE["maker"].framed(documents))


def _all_chunks(inputs, text_field, input_format):
    """Every input's chunks, input after input."""
    for spec in inputs:
        yield from input_chunks(spec, text_field, input_format)


def _start_pool(config, workers):
    """A worker pool, or None for in-process work (workers == 1)."""
    if workers == 1:
        return None
    # forkserver: one clean server process imports TensorFlow once
    # (worker_preload, which also skips TensorFlow's and Keras' unused
    # optional imports), then forks the workers from it, sharing those
    # pages. The main process never imports TensorFlow, so it reads and
    # chunks input meanwhile.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["kerasbert.data.worker_preload", "kerasbert.data.writer"])
    return ctx.Pool(workers, initializer=_init_worker, initargs=(config, True))


def _run_ordered(tasks, config, pool, workers):
    """Yields _process_chunk results in task order; at most 2*workers chunks
    in flight (Pool.imap would read the whole input ahead)."""
    if pool is None:
        _init_worker(config)
        for task in tasks:
            yield _process_chunk(task)
        return
    pending = collections.deque()
    for task in tasks:
        pending.append(pool.apply_async(_process_chunk, (task,)))
        if len(pending) >= 2 * workers:
            yield pending.popleft().get()
    while pending:
        yield pending.popleft().get()


# ---------------------------------------------------------------- writer


class _ShardSet:
    """num_shards files of framed TFRecords under temporary names; commit()
    renames. Plain Python I/O (records arrive framed); GZIP through Python's
    gzip module, which TF's GZIP TFRecord reader reads (no file name or
    time stamp in the header, so output bytes are reproducible)."""

    def __init__(self, output_dir, num_shards, gzip):
        self.names = [shard_name(i, num_shards, gzip) for i in range(num_shards)]
        self.finals = [os.path.join(output_dir, n) for n in self.names]
        self.temps = [os.path.join(output_dir, f".{n}.tmp-{os.getpid()}") for n in self.names]
        self.counts = [0] * num_shards
        self.files = []
        for t in self.temps:
            f = open(t, "wb")
            if gzip:
                f = _GzipShard(f)
            self.files.append(f)
        self.next = 0

    def write(self, records):
        """Round-robin over the shards, continuing where the last call ended."""
        k = len(self.files)
        for i in range(k):
            shard = (self.next + i) % k
            part = records[i::k]
            if part:
                self.files[shard].write(b"".join(part))
                self.counts[shard] += len(part)
        self.next = (self.next + len(records)) % k

    def close(self):
        for f in self.files:
            f.close()

    def commit(self, output_dir):
        """Removes older output (metadata first, so a crash in between never
        leaves metadata describing the wrong shards), then renames."""
        self.close()
        for old in reversed(final_files(output_dir)):
            if old not in self.finals:
                os.remove(old)
        for tmp, final in zip(self.temps, self.finals):
            os.replace(tmp, final)

    def discard(self):
        try:
            self.close()
        finally:
            for t in self.temps:
                if os.path.exists(t):
                    os.remove(t)


class _GzipShard:
    """A gzip stream over an open file that closes both."""

    def __init__(self, raw):
        import gzip

        self.raw = raw
        self.gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0)

    def write(self, data):
        self.gz.write(data)

    def close(self):
        try:
            self.gz.close()
        finally:
            self.raw.close()


def create_pretraining_data(
    inputs, vocab_file, output_dir, *, sequence_length=128, max_predictions_per_seq=20,
    masked_lm_prob=0.15, dupe_factor=10, short_seq_prob=0.1, random_seed=12345,
    lower_case=True, whole_word_mask=False, objective="nsp", masking=True, num_shards=1,
    workers=1, gzip=False, text_field=None, input_format="auto", overwrite=False,
    progress=True, runner="local", pipeline_args=(),
):
    """Writes pretraining TFRecords + metadata.json; returns the metadata dict.

    inputs: text files (original or plain-paragraph format; local glob
    patterns are expanded) and/or `tfds:NAME[:SPLIT]` (with text_field).
    Shards hold serialized tf.train.Example with the features of
    kerasbert.data.schema: input_ids/input_mask/segment_ids
    [sequence_length], masked_lm_* [P] unless masking=False,
    next_sentence_labels [1] unless objective="none".

    runner: "local" (this process and a pool of `workers`) or a Beam runner
    ("direct", "portable", "flink", "spark", "dataflow";
    kerasbert.data.beam_writer, which also takes inputs, vocab_file and
    output_dir on gs://, s3://, hdfs:// and the runner's own
    `pipeline_args`).
    Every runner writes the same multiset of records for the same inputs
    and seed. Raises UsageError on bad options or inputs, before writing
    anything.
    """
    settings = dict(
        sequence_length=sequence_length,
        max_predictions_per_seq=max_predictions_per_seq, masked_lm_prob=masked_lm_prob,
        dupe_factor=dupe_factor, short_seq_prob=short_seq_prob, random_seed=random_seed,
        lower_case=lower_case, whole_word_mask=whole_word_mask, objective=objective,
        masking=masking, num_shards=num_shards, workers=workers, gzip=gzip,
        text_field=text_field, input_format=input_format, runner=runner)
    if runner != "local" and runner in RUNNERS:
        return _write_with_beam(inputs, vocab_file, output_dir, settings, overwrite=overwrite,
                                pipeline_args=pipeline_args, progress=progress)
    run = Run(inputs, vocab_file, **settings)
    if pipeline_args:
        raise UsageError(f"pipeline options {' '.join(pipeline_args)} need a Beam --runner "
                         "(direct, portable, flink, spark, dataflow), not local.")
    files = expand_inputs(inputs)
    check_inputs(files, text_field)
    check_text_files(files)  # not UTF-8, or no text: refused before anything is written
    check_output_dir(output_dir, overwrite)
    created = not os.path.exists(output_dir)
    os.makedirs(output_dir, exist_ok=True)
    started = time.time()
    shards, num_docs = _write_local(run, files, output_dir, created, progress)
    metadata = run.metadata(dict(zip(shards.names, shards.counts)), num_docs,
                            time.time() - started)
    meta_lib.write_metadata(output_dir, metadata)
    return metadata


def _write_with_beam(inputs, vocab_file, output_dir, settings, *, overwrite, pipeline_args,
                     progress):
    """create_pretraining_data on a Beam runner (kerasbert.data.beam_writer);
    returns the metadata dict."""
    runner = settings["runner"]
    if importlib.util.find_spec("apache_beam") is None:
        raise UsageError(
            f"--runner {runner} needs the package apache-beam, which is not installed: "
            "pip install -c constraints.txt apache-beam.")
    from kerasbert.data import beam_writer  # lazy: apache_beam

    # The tokenizer is read once, here (also from gs://, s3://, ...); the
    # pipeline's workers get its files by value.
    with beam_writer.driver_copy(vocab_file, pipeline_args) as vocab:
        run = Run(inputs, vocab, **settings)
        return beam_writer.write(run, output_dir, overwrite=overwrite,
                                 pipeline_args=list(pipeline_args), progress=progress)


def _write_local(run, files, output_dir, created, progress):
    """The local driver: chunks through the pool, a bounded shuffle, shards
    committed under their final names. Returns (shard set, documents)."""
    from tqdm import tqdm

    o = run.options
    workers = o["workers"]
    pool = _start_pool(run.config, workers)
    try:
        shards = _ShardSet(output_dir, o["num_shards"], o["gzip"])
    except BaseException:
        if pool is not None:
            pool.terminate()
        if created:
            _remove_if_empty(output_dir)
        raise
    shuffle_rng = np.random.default_rng([o["random_seed"], 0x5EED])
    buffer = []
    num_docs = 0
    bar = tqdm(unit=" doc", desc="create-pretraining-data", disable=not progress)
    try:
        tasks = _all_chunks(files, o["text_field"], o["input_format"])
        for n_docs, data, sizes in _run_ordered(tasks, run.config, pool, workers):
            num_docs += n_docs
            records = split_framed(data, sizes)
            del data
            # Bounded shuffle: the original shuffles all instances in
            # memory; we mix within SHUFFLE_BUFFER (readers shuffle too).
            # Each record past a full buffer swaps with a random one.
            fill = min(SHUFFLE_BUFFER - len(buffer), len(records))
            buffer.extend(records[:fill])
            rest = records[fill:]
            if rest:
                out = []
                for j, record in zip(shuffle_rng.integers(0, SHUFFLE_BUFFER, len(rest)).tolist(),
                                     rest):
                    out.append(buffer[j])
                    buffer[j] = record
                shards.write(out)
            bar.update(n_docs)
            bar.set_postfix(instances=sum(shards.counts) + len(buffer), refresh=False)
        shards.write([buffer[j] for j in shuffle_rng.permutation(len(buffer)).tolist()])
        buffer = []
        if pool is not None:
            pool.close()
            pool.join()
        check_produced(num_docs, sum(shards.counts), run.inputs)
        shards.commit(output_dir)
    except BaseException:
        shards.discard()
        if created:
            _remove_if_empty(output_dir)
        raise
    finally:
        if pool is not None:
            pool.terminate()
        bar.close()
    return shards, num_docs
