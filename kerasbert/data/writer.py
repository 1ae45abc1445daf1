"""Streaming, parallel, atomic pretraining-data writer.

Pipeline (bounded memory at every stage):

    text_input.iter_documents      one document at a time
      -> chunks of <= CHUNK_DOCS documents / CHUNK_BYTES of text, numbered
      -> worker processes: tokenize the whole chunk in one tensorflow-text
         call, make instances with kerasbert.data.instances (the NSP buffer
         of "other documents" is the rest of the chunk), serialize, and
         frame them as TFRecords (length + crc32c)
      -> main process, in chunk order: a bounded shuffle buffer, then
         round-robin over `num_shards` shards written under temporary names.

The main process never imports TensorFlow when there are worker processes:
it reads text, shuffles and writes bytes. TensorFlow is imported once, in
a forkserver that forks the workers (`_start_pool`).

Determinism: chunking depends only on the input, each chunk's RNG is
seeded from (random_seed, index of its first document) and the shuffle
buffer from random_seed, so a fixed seed gives identical bytes for ANY
number of workers.

Atomicity: shards are written as `.part-*.tmp` and renamed only after every
shard is complete; metadata.json is written last (atomically). A failure or
interrupt removes the temporaries and leaves earlier output untouched.
"""

import collections
import glob
import multiprocessing
import os
import time

import numpy as np

from kerasbert.data import instances as inst_lib
from kerasbert.data import metadata as meta_lib
from kerasbert.data import schema
from kerasbert.data.text_input import FORMATS
from kerasbert.data.text_input import check_inputs
from kerasbert.data.text_input import check_text_files
from kerasbert.data.text_input import iter_documents
from kerasbert.errors import UsageError
from kerasbert.text.families import BPE
from kerasbert.text.families import read_vocabulary
from kerasbert.text.families import special_ids
from kerasbert.text.loading import load_tokenizer
from kerasbert.version import __version__

CHUNK_DOCS = 64
CHUNK_BYTES = 1 << 20
SHUFFLE_BUFFER = 10_000


def shard_name(index, num_shards, gzip=False):
    return f"part-{index:05d}-of-{num_shards:05d}.tfrecord" + (".gz" if gzip else "")


# ---------------------------------------------------------------- options


def validate_options(o):
    """Raises UsageError naming the first bad option."""
    if o["objective"] not in schema.OBJECTIVES:
        raise UsageError(f"--objective {o['objective']!r}: expected one of {schema.OBJECTIVES}.")
    min_len = 3 if o["objective"] == "none" else 5
    if o["max_seq_length"] < min_len:
        raise UsageError(f"--max-seq-length {o['max_seq_length']} is too short (>= {min_len}).")
    if not 1 <= o["max_predictions_per_seq"] <= o["max_seq_length"]:
        raise UsageError(
            f"--max-predictions-per-seq {o['max_predictions_per_seq']} must be in "
            f"[1, max_seq_length={o['max_seq_length']}]."
        )
    for key in ("masked_lm_prob", "short_seq_prob"):
        if not 0.0 <= o[key] <= 1.0:
            raise UsageError(f"--{key.replace('_', '-')} {o[key]} is not a probability in [0, 1].")
    if o["masking"] and o["masked_lm_prob"] <= 0.0:
        raise UsageError("--masked-lm-prob must be > 0 (or use --no-masking).")
    for key in ("dupe_factor", "num_shards", "workers"):
        if o[key] < 1:
            raise UsageError(f"--{key.replace('_', '-')} {o[key]} must be >= 1.")
    if o["input_format"] not in FORMATS:
        raise UsageError(f"--input-format {o['input_format']!r}: expected one of {FORMATS}.")


def read_specials(vocab_path):
    """(tokenizer kind, `Specials`) of any `--vocab` path: the family's
    start / separator / mask / padding tokens looked up by string
    ([CLS] [SEP] [MASK] [PAD]; ALBERT's <pad>; RoBERTa's <s> </s> <mask>
    <pad>), never assumed. Plain Python: the main process stays free of
    TensorFlow."""
    kind, files, tokens = read_vocabulary(vocab_path)
    try:
        ids = special_ids(kind, tokens, files[0])
    except ValueError as error:
        raise UsageError(str(error)) from None
    return kind, inst_lib.Specials(
        vocab_size=len(tokens), cls_id=ids["cls_id"], sep_id=ids["sep_id"],
        mask_id=ids["mask_id"], pad_id=ids["pad_id"])


def _check_output_dir(output_dir, overwrite):
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise UsageError(f"--output-dir {output_dir} exists and is not a folder.")
    existing = _final_files(output_dir)
    if existing and not overwrite:
        raise UsageError(
            f"--output-dir {output_dir} already holds pretraining data "
            f"({os.path.basename(existing[0])}, ...); pass --overwrite or pick another folder."
        )


def _check_produced(num_docs, num_instances, inputs):
    """Refuses to commit an empty result: 0 instances is never a success
    (a later `pretrain` would have nothing to read)."""
    if num_docs == 0:
        raise UsageError(f"no documents in --input {' '.join(inputs)}: nothing to write.")
    if num_instances == 0:
        raise UsageError(
            f"no instances from the {num_docs} document(s) in --input {' '.join(inputs)}: "
            "their sentences tokenize to no tokens.")


def _remove_if_empty(folder):
    """Removes a folder this run created, when a failure left it empty."""
    try:
        os.rmdir(folder)
    except OSError:
        pass


def _final_files(output_dir):
    found = glob.glob(os.path.join(output_dir, "part-*-of-*.tfrecord*"))
    meta = os.path.join(output_dir, meta_lib.METADATA_FILE)
    return sorted(found) + ([meta] if os.path.exists(meta) else [])


# ---------------------------------------------------------------- workers


class _Tokenizer:
    """Sentences -> flat piece ids, word starts and sentence offsets.

    Any tokenizer of the zoo (WordPiece, SentencePiece, byte-level BPE,
    picked by `kerasbert.text.load_tokenizer` from the path), one batched
    tensorflow-text call per chunk. Its word grouping gives the word starts
    whole-word masking uses: a piece without "##", a "▁" piece, a "Ġ" piece
    (and each sentence's first piece)."""

    def __init__(self, vocab_path, lower_case):
        import tensorflow as tf

        self._tok = load_tokenizer(vocab_path, lower_case=lower_case)
        self._tf = tf

    def tokenize(self, sentences):
        """list[str] of S sentences -> (ids [n], starts [n], offsets [S + 1])."""
        rt = self._tok.tokenize(self._tf.constant(sentences, dtype=self._tf.string))
        ids = rt.flat_values.numpy()
        piece_splits = rt.values.row_splits.numpy()  # word -> pieces
        word_splits = rt.row_splits.numpy()  # sentence -> words
        starts = np.zeros(len(ids), dtype=bool)
        starts[piece_splits[:-1][np.diff(piece_splits) > 0]] = True
        return ids, starts, piece_splits[word_splits]


class _Framer:
    """TFRecord framing of a chunk's records, done in the worker.

    Each record on disk is: uint64 length, masked crc32c of the length,
    data, masked crc32c of the data. The workers hold TensorFlow anyway (for
    the tokenizer), so tf.io.TFRecordWriter frames the chunk into an
    in-memory `ram://` file in C++; the main process then only shuffles and
    writes bytes, and never imports TensorFlow (saving its ~5 s import and
    ~0.8 GB of RSS)."""

    def __init__(self):
        import tensorflow as tf

        self._tf = tf
        self._path = f"ram://kerasbert-writer-{os.getpid()}.tfrecord"

    def frame(self, records):
        """list of bytes -> one bytes object of the framed records."""
        tf = self._tf
        with tf.io.TFRecordWriter(self._path) as w:
            for record in records:
                w.write(record)
        with tf.io.gfile.GFile(self._path, "rb") as f:
            data = f.read()
        tf.io.gfile.remove(self._path)
        return data


_STATE = {}  # Per worker process: tokenizer, encoder, framer, options.


def _init_worker(config, in_pool=False):
    _STATE.clear()
    _STATE.update(config)
    if in_pool:
        import tensorflow as tf

        # One thread per pool worker: the processes already fill the cores,
        # and TF's idle pool threads spin, stealing CPU from the others.
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    _STATE["tokenizer"] = _Tokenizer(config["vocab_file"], config["lower_case"])
    o = config["instance_options"]
    _STATE["encoder"] = inst_lib.ExampleEncoder(
        config["specials"].vocab_size, o.sequence_length, o.max_predictions_per_seq,
        o.objective, o.masking, pad_id=config["specials"].pad_id,
    )
    _STATE["framer"] = _Framer()


def make_chunk_examples(chunk, first_doc_index, config, encoder):
    """Serialized tf.train.Examples of one chunk (all dupes), in a fixed order.

    chunk: an instances.TokenizedChunk. Randomness comes from one Generator
    seeded by (random_seed, first_doc_index): chunking depends only on the
    input, so the output does not depend on the number of workers."""
    rng = np.random.default_rng([config["random_seed"], first_doc_index])
    records = []
    for batch in inst_lib.chunk_batches(
        chunk, config["instance_options"], config["specials"], rng, config["dupe_factor"]
    ):
        records.extend(encoder.encode_batch(batch))
    return records


def _process_chunk(task):
    """(first_doc_index, [[sentence str]]) -> (n_docs, framed records as
    one bytes object, [framed size of each record])."""
    first, documents = task
    sentences = [s for doc in documents for s in doc]
    if sentences:
        ids, starts, offsets = _STATE["tokenizer"].tokenize(sentences)
    else:
        ids, starts, offsets = [], [], [0]
    chunk = inst_lib.TokenizedChunk.from_sentences(
        ids, starts, offsets, [len(doc) for doc in documents])
    records = make_chunk_examples(chunk, first, _STATE, _STATE["encoder"])
    # 16 bytes of framing per record: length (8) and two crc32c (4 + 4).
    return len(documents), _STATE["framer"].frame(records), [len(r) + 16 for r in records]


def _chunks(documents):
    """Groups documents into (first_doc_index, docs) tasks, independent of
    the worker count (so output is too)."""
    batch, size, first, index = [], 0, 0, 0
    for doc in documents:
        batch.append(doc)
        size += sum(len(s) for s in doc)
        index += 1
        if len(batch) >= CHUNK_DOCS or size >= CHUNK_BYTES:
            yield first, batch
            batch, size, first = [], 0, index
    if batch:
        yield first, batch


def _start_pool(config, workers):
    """A worker pool, or None for in-process work (workers == 1)."""
    if workers == 1:
        return None
    # forkserver: one clean server process imports TensorFlow once
    # (worker_preload, which also skips Keras' scikit-learn import), then
    # forks the workers from it, sharing those pages. The main process never
    # imports TensorFlow, so it reads and chunks input meanwhile.
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
        for old in reversed(_final_files(output_dir)):
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
    inputs,
    vocab_file,
    output_dir,
    *,
    sequence_length=128,
    max_predictions_per_seq=20,
    masked_lm_prob=0.15,
    dupe_factor=10,
    short_seq_prob=0.1,
    random_seed=12345,
    lower_case=True,
    whole_word_mask=False,
    objective="nsp",
    masking=True,
    num_shards=1,
    workers=1,
    gzip=False,
    text_field=None,
    input_format="auto",
    overwrite=False,
    progress=True,
):
    """Writes pretraining TFRecords + metadata.json; returns the metadata dict.

    inputs: text files (original or plain-paragraph format) and/or
    `tfds:NAME[:SPLIT]` (with text_field). Shards hold serialized
    tf.train.Example with the features of kerasbert.data.schema:
    input_ids/input_mask/segment_ids [sequence_length], masked_lm_* [P] unless
    masking=False, next_sentence_labels [1] unless objective="none".
    Raises UsageError on bad options or inputs, before writing anything.
    """
    options = dict(
        # Keys as metadata.json's "options" has always spelled them.
        max_seq_length=sequence_length, max_predictions_per_seq=max_predictions_per_seq,
        masked_lm_prob=masked_lm_prob, dupe_factor=dupe_factor,
        short_seq_prob=short_seq_prob, random_seed=random_seed, lower_case=lower_case,
        whole_word_mask=whole_word_mask, objective=objective, masking=masking,
        num_shards=num_shards, workers=workers, gzip=gzip, text_field=text_field,
        input_format=input_format, inputs=list(inputs),
    )
    validate_options(options)
    kind, specials = read_specials(vocab_file)
    if kind == BPE:
        if objective != "none":
            raise UsageError(
                f"--objective {objective}: byte-level BPE (RoBERTa) data is written with "
                "--objective none (FULL-SENTENCES: <s> sentences </s>, no sentence label); "
                "sentence pairs are for WordPiece (nsp) and SentencePiece (sop, ALBERT).")
        lower_case = False  # byte-level BPE is cased by construction
        options["lower_case"] = False
    check_inputs(inputs, text_field)
    check_text_files(inputs)  # not UTF-8, or no text: refused before anything is written
    _check_output_dir(output_dir, overwrite)
    created = not os.path.exists(output_dir)
    os.makedirs(output_dir, exist_ok=True)

    config = dict(
        vocab_file=os.path.abspath(vocab_file), lower_case=lower_case, specials=specials,
        random_seed=random_seed, dupe_factor=dupe_factor,
        instance_options=inst_lib.InstanceOptions(
            sequence_length=sequence_length, max_predictions_per_seq=max_predictions_per_seq,
            masked_lm_prob=masked_lm_prob, short_seq_prob=short_seq_prob,
            whole_word_mask=whole_word_mask, objective=objective, masking=masking,
        ),
    )
    from tqdm import tqdm

    pool = _start_pool(config, workers)
    try:
        shards = _ShardSet(output_dir, num_shards, gzip)
    except BaseException:
        if pool is not None:
            pool.terminate()
        if created:
            _remove_if_empty(output_dir)
        raise
    shuffle_rng = np.random.default_rng([random_seed, 0x5EED])
    buffer = []
    num_docs = 0
    started = time.time()
    bar = tqdm(unit=" doc", desc="create-pretraining-data", disable=not progress)
    try:
        documents = iter_documents(inputs, text_field, input_format)
        for n_docs, data, sizes in _run_ordered(_chunks(documents), config, pool, workers):
            num_docs += n_docs
            records, pos = [], 0
            for size in sizes:
                records.append(data[pos:pos + size])
                pos += size
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
        _check_produced(num_docs, sum(shards.counts), list(inputs))
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

    sha, vocab_lines = meta_lib.vocab_fingerprint(vocab_file)
    names = schema.feature_names(objective, masking)

    metadata = {
        "schema_version": schema.SCHEMA_VERSION,
        "features": schema.describe_features(names, sequence_length, max_predictions_per_seq),
        "max_seq_length": sequence_length,
        "max_predictions_per_seq": max_predictions_per_seq,
        "objective": objective,
        "masking": "static" if masking else "dynamic",
        "whole_word_mask": whole_word_mask,
        "tokenizer": kind,
        "vocab_sha256": sha,
        "vocab_size": vocab_lines,
        "lower_case": lower_case,
        "random_seed": random_seed,
        "options": options,
        "shards": dict(zip(shards.names, shards.counts)),
        "num_instances": sum(shards.counts),
        "num_documents": num_docs,
        "compression": "GZIP" if gzip else None,
        "created_by": f"kerasbert {__version__} create-pretraining-data",
        "seconds": round(time.time() - started, 3),
    }
    meta_lib.write_metadata(output_dir, metadata)
    return metadata
