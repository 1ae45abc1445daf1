"""The unit of work of pretraining-data creation, shared by every driver.

A chunk is a short run of consecutive documents of ONE input: at most
CHUNK_DOCS documents or CHUNK_BYTES of text from a text file, or CHUNK_DOCS
examples of a TFDS split. `ChunkMaker` turns a chunk into framed TFRecords:
tokenize the whole chunk in one tensorflow-text call, make instances with
kerasbert.data.instances (NSP's random B comes from the chunk's other
documents), serialize, frame.

Both drivers run exactly this code: the local writer (kerasbert.data.writer,
a process pool) and the Beam pipeline (kerasbert.data.beam_writer). Their
output is the same multiset of records because nothing here depends on the
driver:
  * chunk boundaries depend only on the input's own content (a chunk never
    spans two inputs, and a TFDS chunk starts at a multiple of CHUNK_DOCS,
    so a reader of the examples [start, stop) finds the same chunks);
  * a chunk's randomness comes from the run seed and a hash of the chunk's
    text (`chunk_rng`), not from its position among the inputs, so neither
    the order of the inputs nor the number of workers changes it.
"""

import hashlib
import itertools
import os

import numpy as np

from kerasbert.data import instances as inst_lib
from kerasbert.data.text_input import file_documents
from kerasbert.data.text_input import tfds_examples
from kerasbert.text.tokenizer_loading import load_tokenizer

CHUNK_DOCS = 64
CHUNK_BYTES = 1 << 20
# 16 bytes of TFRecord framing per record: length (8) and two crc32c (4 + 4).
FRAMING_BYTES = 16


def text_chunks(documents):
    """Groups one input's documents into chunks: a new chunk after
    CHUNK_DOCS documents or CHUNK_BYTES of sentence text."""
    batch, size = [], 0
    for doc in documents:
        batch.append(doc)
        size += sum(len(s) for s in doc)
        if len(batch) >= CHUNK_DOCS or size >= CHUNK_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def example_chunks(examples):
    """Groups a TFDS split's examples by CHUNK_DOCS (counting examples
    without text, so the boundaries are fixed by example index)."""
    it = iter(examples)
    while True:
        group = list(itertools.islice(it, CHUNK_DOCS))
        if not group:
            return
        docs = [doc for doc in group if doc]
        if docs:
            yield docs


def input_chunks(spec, text_field=None, input_format="auto", open_lines=None,
                 start=None, stop=None):
    """The chunks of one input: a text file (opened by `open_lines`, local by
    default) or `tfds:NAME[:SPLIT]`, of which start/stop (multiples of
    CHUNK_DOCS) select the examples [start, stop)."""
    if spec.startswith("tfds:"):
        if start is not None and start % CHUNK_DOCS:
            raise ValueError(f"start {start} is not a multiple of CHUNK_DOCS={CHUNK_DOCS}")
        return example_chunks(tfds_examples(spec, text_field, start, stop))
    return text_chunks(file_documents(spec, input_format, open_lines))


def chunk_rng(random_seed, documents):
    """The chunk's numpy Generator, seeded by the run seed and a hash of the
    chunk's sentences (and where its documents and sentences break)."""
    h = hashlib.blake2b(digest_size=16, person=b"kerasbert-chunk")
    for doc in documents:
        for sentence in doc:
            h.update(sentence.encode("utf-8"))
            h.update(b"\n")
        h.update(b"\x00")
    digest = h.digest()
    return np.random.default_rng(
        [random_seed, int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little")])


class Tokenizer:
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


class Framer:
    """TFRecord framing of a chunk's records, done where they are made.

    Each record on disk is: uint64 length, masked crc32c of the length,
    data, masked crc32c of the data. The makers hold TensorFlow anyway (for
    the tokenizer), so tf.io.TFRecordWriter frames the chunk into an
    in-memory `ram://` file in C++; whoever writes the shards then only
    moves bytes (the local writer's main process never imports TensorFlow,
    saving its ~5 s import and ~0.8 GB of RSS)."""

    def __init__(self):
        import tensorflow as tf

        self._tf = tf
        self._path = f"ram://kerasbert-chunk-{os.getpid()}-{id(self)}.tfrecord"

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


def split_framed(data, sizes):
    """One bytes object of framed records -> the list of framed records."""
    records, pos = [], 0
    for size in sizes:
        records.append(data[pos:pos + size])
        pos += size
    return records


class ChunkMaker:
    """Chunk (list of documents) -> framed records, for one run's settings.

    config: the dict `writer.chunk_config` builds (vocabulary, lower_case,
    specials, random_seed, dupe_factor, instance options): plain values that
    pickle, so it travels to pool workers and Beam workers alike."""

    def __init__(self, config):
        self.config = config
        self.tokenizer = Tokenizer(config["vocab_file"], config["lower_case"])
        o = config["instance_options"]
        self.encoder = inst_lib.ExampleEncoder(
            config["specials"].vocab_size, o.sequence_length, o.max_predictions_per_seq,
            o.objective, o.masking, pad_id=config["specials"].pad_id,
        )
        self.framer = Framer()

    def examples(self, documents):
        """Serialized tf.train.Examples of one chunk (all dupes), in a fixed
        order."""
        sentences = [s for doc in documents for s in doc]
        if sentences:
            ids, starts, offsets = self.tokenizer.tokenize(sentences)
        else:
            ids, starts, offsets = [], [], [0]
        chunk = inst_lib.TokenizedChunk.from_sentences(
            ids, starts, offsets, [len(doc) for doc in documents])
        rng = chunk_rng(self.config["random_seed"], documents)
        records = []
        for batch in inst_lib.chunk_batches(
            chunk, self.config["instance_options"], self.config["specials"], rng,
            self.config["dupe_factor"]
        ):
            records.extend(self.encoder.encode_batch(batch))
        return records

    def framed(self, documents):
        """(framed records as one bytes object, [framed size of each record])."""
        records = self.examples(documents)
        return self.framer.frame(records), [len(r) + FRAMING_BYTES for r in records]
