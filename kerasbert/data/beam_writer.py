"""Pretraining data at corpus scale: the local writer's chunks on Apache Beam.

`create-pretraining-data --runner direct|portable|flink|spark|dataflow`
runs this pipeline. It executes the same unit of work as `--runner local`
(kerasbert.data.chunks: chunk boundaries and seeds depend only on each
input's content), so both write the same multiset of tf.train.Examples
byte for byte; only their order differs.

    sources        text files matched by Beam's file systems (local, gs://,
                   s3://, hdfs://) and TFDS example ranges of 4096
      | Reshuffle  spread the sources over the workers
      | ParDo      each source's chunks -> ChunkMaker -> framed records;
                   every record gets a key, a keyed hash of its bytes (so a
                   fixed pseudo-random position), and goes to shard
                   key % num_shards; a worker buffers records per shard and
                   writes them as "piece" files (at most FLUSH_BYTES held)
      | GroupByKey only (piece path, count) pairs travel through the
                   runner's shuffle, never the records
      | Map        per shard: merge its pieces (each sorted by key) into
                   one stream in key order (a global shuffle), written
                   under a temporary name
    counts         per-shard record counts and the document count, written
                   by the pipeline into its temporary folder

Then this process (the driver) checks the counts, renames the shards to
their final names and writes metadata.json last, from the pipeline's own
counts. A failed or interrupted pipeline leaves only a hidden temporary
folder, which no reader looks at and the next writer removes; earlier
output is untouched until the commit. Shard bytes depend only on the
inputs and settings, not on the runner or the number of workers.

Workers of every runner but `direct` start bare (other machines or
containers): the pipeline stages a wheel of this kerasbert
(--extra_package) and carries the tokenizer's files by value; inputs,
--vocab and --output-dir may be on any Beam file system (gs://, s3://,
hdfs://). See kerasbert.data.beam_shipping and beam/ (the boot script of a
PROCESS environment, the SDK container's Dockerfile).

A source is a whole file: a Beam run parallelises over input files (the
usual sharded corpus; split one huge file first, e.g. `split -n l/64`) and
over TFDS example ranges. Memory: a worker holds one chunk and at most
FLUSH_BYTES of records; the shard stage a read block per piece of the shard
(pieces: about output size / FLUSH_BYTES per worker).
"""

import contextlib
import gzip as gzip_lib
import hashlib
import heapq
import io
import json
import os
import re
import shutil
import struct
import tempfile
import time
import uuid

import apache_beam as beam
from apache_beam.io.filesystems import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.window import GlobalWindows

from kerasbert.data import metadata as meta_lib
from kerasbert.data import beam_shipping
from kerasbert.data.beam_shipping import TokenizerFiles
from kerasbert.data.beam_options import BEAM_RUNNERS  # noqa: F401
from kerasbert.data.beam_options import ENVIRONMENT_TYPES  # noqa: F401
from kerasbert.data.beam_options import REQUIRED_OPTIONS  # noqa: F401
from kerasbert.data.beam_options import SHIPPING_RUNNERS  # noqa: F401
from kerasbert.data.beam_options import check_paths
from kerasbert.data.beam_options import is_remote
from kerasbert.data.beam_options import pipeline_options
from kerasbert.data.chunks import CHUNK_DOCS
from kerasbert.data.chunks import ChunkMaker
from kerasbert.data.chunks import input_chunks
from kerasbert.data.chunks import split_framed
from kerasbert.data.pretraining_run import check_output_dir
from kerasbert.data.pretraining_run import check_produced
from kerasbert.data.pretraining_run import shard_name
from kerasbert.data.text_input import check_text_files
from kerasbert.data.text_input import parse_tfds_spec
from kerasbert.data.text_input import tfds_num_examples
from kerasbert.errors import UsageError

TFDS_RANGE = 64 * CHUNK_DOCS  # Examples per TFDS source (a multiple of CHUNK_DOCS).
FLUSH_BYTES = 64 << 20  # Records a worker holds before writing pieces.
PIECE_READ_BYTES = 1 << 20  # Read block per piece while merging a shard.
_KEY_BYTES = 8


# ------------------------------------------------------------ sources


def match_sources(inputs, text_field):
    """The pipeline's sources: ("file", path) for every file a pattern
    matches (through Beam's file systems), ("tfds", spec, start, stop) per
    TFDS_RANGE examples. UsageError for a pattern that matches nothing."""
    sources = []
    for spec in inputs:
        if spec.startswith("tfds:"):
            parse_tfds_spec(spec)
            if not text_field:
                raise UsageError(f"{spec} needs --text-field (e.g. --text-field text).")
            total = tfds_num_examples(spec)
            if total is None:
                sources.append(("tfds", spec, None, None))
            else:
                sources.extend(("tfds", spec, start, min(start + TFDS_RANGE, total))
                               for start in range(0, total, TFDS_RANGE))
            continue
        try:
            found = FileSystems.match([spec])[0].metadata_list
        except Exception as err:  # BeamIOError: no such bucket, no credentials, ...
            raise UsageError(f"--input {spec}: cannot list it: {err}") from None
        files = sorted(m.path for m in found if not m.path.endswith("/"))
        if not files:
            raise UsageError(f"--input {spec}: no file matches it (Input file not found).")
        sources.extend(("file", path) for path in files)
    return sources


@contextlib.contextmanager
def _beam_lines(path):
    """Text lines of a file opened through Beam's file systems (a .gz or
    .bz2 name is decompressed), strict UTF-8 with the error naming the
    file."""
    raw = FileSystems.open(path)
    try:
        yield _strict_lines(io.TextIOWrapper(raw, encoding="utf-8-sig"), path)
    finally:
        raw.close()


def _strict_lines(text, path):
    number = 0
    try:
        for number, line in enumerate(text, 1):
            yield line
    except UnicodeDecodeError as err:
        raise UsageError(
            f"{path}: not UTF-8 text: byte 0x{err.object[err.start]:02x} after line "
            f"{number} does not decode; convert the file to UTF-8 "
            "(e.g. iconv -f LATIN1 -t UTF-8).") from None


def source_chunks(source, text_field, input_format):
    """The chunks of one source, exactly as the local writer cuts them."""
    if source[0] == "tfds":
        _, spec, start, stop = source
        return input_chunks(spec, text_field, start=start, stop=stop)
    return input_chunks(source[1], input_format=input_format, open_lines=_beam_lines)


# ------------------------------------------------------------ records


def record_key(record, seed):
    """A record's sort key: a keyed hash of its bytes (the global shuffle)."""
    return hashlib.blake2b(record, digest_size=_KEY_BYTES,
                           key=seed.to_bytes(16, "little", signed=True)).digest()


def read_piece(data):
    """A piece file's bytes -> [key + framed record], as written."""
    return list(iter_piece(io.BytesIO(data)))


def iter_piece(stream, block=PIECE_READ_BYTES):
    """Yields the [key + framed record]s of an open piece file, reading
    `block` bytes at a time (the shard stage merges many pieces at once, so
    it never holds one whole)."""
    buffer, pos = b"", 0
    while True:
        while len(buffer) - pos < _KEY_BYTES + 8:
            more = stream.read(block)
            if not more:
                if len(buffer) > pos:
                    raise ValueError(f"a piece file ends inside a record header "
                                     f"({len(buffer) - pos} bytes left)")
                return
            buffer, pos = buffer[pos:] + more, 0
        (length,) = struct.unpack_from("<Q", buffer, pos + _KEY_BYTES)
        end = pos + _KEY_BYTES + 16 + length
        while end > len(buffer):
            more = stream.read(max(block, end - len(buffer)))
            if not more:
                raise ValueError("a piece file ends inside a record")
            buffer = buffer[pos:] + more
            end -= pos
            pos = 0
        yield buffer[pos:end]
        pos = end


def _write_file(path, data):
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(data)


def _read_file(path):
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        return f.read()


class MakePieces(beam.DoFn):
    """Sources -> piece files of keyed, framed records, per shard.

    Main output: (shard, (piece path, count)); tagged "documents": the
    number of documents of each source.

    The tokenizer comes by value (`tokenizer`, a beam_shipping.TokenizerFiles):
    each worker writes its files into a temporary folder of its own, so
    no worker reads the driver's --vocab path (config["vocab_file"] is not
    sent)."""

    def __init__(self, config, tokenizer, text_field, input_format, temp_dir, num_shards):
        self.config = dict(config, vocab_file=None)
        self.tokenizer = tokenizer
        self.text_field, self.input_format = text_field, input_format
        self.temp_dir, self.num_shards = temp_dir, num_shards

    def setup(self):
        import tensorflow as tf

        # One thread per worker: Beam runs a worker per core already.
        with contextlib.suppress(RuntimeError):  # TF already running here
            tf.config.threading.set_intra_op_parallelism_threads(1)
            tf.config.threading.set_inter_op_parallelism_threads(1)
        self.tokenizer_dir = tempfile.mkdtemp(prefix="kerasbert-tokenizer-")
        vocab = self.tokenizer.write(self.tokenizer_dir)
        self.maker = ChunkMaker(dict(self.config, vocab_file=vocab))

    def teardown(self):
        folder = getattr(self, "tokenizer_dir", None)
        if folder:
            shutil.rmtree(folder, ignore_errors=True)

    def start_bundle(self):
        self.buffers = [[] for _ in range(self.num_shards)]
        self.held = 0

    def process(self, source):
        seed = self.config["random_seed"]
        documents = 0
        for chunk in source_chunks(source, self.text_field, self.input_format):
            documents += len(chunk)
            for record in split_framed(*self.maker.framed(chunk)):
                key = record_key(record, seed)
                self.buffers[int.from_bytes(key, "big") % self.num_shards].append(key + record)
                self.held += len(record) + _KEY_BYTES
            if self.held >= FLUSH_BYTES:
                yield from self.flush()
        yield beam.pvalue.TaggedOutput("documents", documents)

    def finish_bundle(self):
        for piece in self.flush():
            yield GlobalWindows.windowed_value(piece)

    def flush(self):
        for shard, records in enumerate(self.buffers):
            if records:
                # Sorted by key (the records start with it), so the shard
                # stage merges pieces instead of loading and sorting them.
                records.sort()
                path = f"{self.temp_dir}/pieces/{shard:05d}-{uuid.uuid4().hex}.bin"
                _write_file(path, b"".join(records))
                yield shard, (path, len(records))
        self.buffers = [[] for _ in range(self.num_shards)]
        self.held = 0


def write_shard(element, temp_dir, names, gzip):
    """(shard, [piece or None]) -> (shard file name, records): the shard's
    records in key order, written to the temporary folder.

    Every piece is sorted already, so this is a streaming k-way merge: the
    memory is a read block per piece, not the shard (it stays flat as the
    corpus grows)."""
    shard, pieces = element
    paths = sorted(p[0] for p in pieces if p is not None)
    count = 0
    with contextlib.ExitStack() as stack:
        streams = [stack.enter_context(
            FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED))
            for path in paths]
        out = stack.enter_context(FileSystems.create(
            f"{temp_dir}/shards/{names[shard]}", compression_type=CompressionTypes.UNCOMPRESSED))
        if gzip:
            # No file name or time stamp in the header: reproducible bytes, as
            # the local writer's.
            out = stack.enter_context(gzip_lib.GzipFile(
                filename="", mode="wb", fileobj=out, compresslevel=6, mtime=0))
        pending, size = [], 0
        for record in heapq.merge(*(iter_piece(s) for s in streams)):
            pending.append(record[_KEY_BYTES:])
            size += len(record)
            count += 1
            if size >= PIECE_READ_BYTES:
                out.write(b"".join(pending))
                pending, size = [], 0
        out.write(b"".join(pending))
    return names[shard], count


def _write_json(value, path):
    _write_file(path, json.dumps(value).encode("utf-8"))


def build_pipeline(pipeline, run, sources, temp_dir, names, tokenizer):
    """Adds the pipeline's transforms to `pipeline` (see the module doc);
    `tokenizer`: the run's TokenizerFiles."""
    o = run.options
    make = MakePieces(run.config, tokenizer, o["text_field"], o["input_format"], temp_dir,
                      len(names))
    made = (
        pipeline
        | "Sources" >> beam.Create(sources)
        | "Spread" >> beam.Reshuffle()
        | "MakePieces" >> beam.ParDo(make).with_outputs("documents", main="pieces"))
    every_shard = pipeline | "EveryShard" >> beam.Create([(i, None) for i in range(len(names))])
    counts = (
        (made.pieces, every_shard)
        | "Join" >> beam.Flatten()
        | "ByShard" >> beam.GroupByKey()
        | "WriteShards" >> beam.Map(write_shard, temp_dir, names, o["gzip"]))
    (counts | "AllCounts" >> beam.combiners.ToList()
     | "WriteCounts" >> beam.Map(_write_json, f"{temp_dir}/counts.json"))
    (made.documents | "Documents" >> beam.CombineGlobally(sum)
     | "WriteDocuments" >> beam.Map(_write_json, f"{temp_dir}/documents.json"))


# ------------------------------------------------------------ driver


def _final_files(output_dir):
    found = FileSystems.match([f"{output_dir}/part-*-of-*.tfrecord*"])[0].metadata_list
    meta = f"{output_dir}/{meta_lib.METADATA_FILE}"
    return sorted(m.path for m in found) + ([meta] if FileSystems.exists(meta) else [])


def _worker_error(err):
    """The UsageError a worker raised (Beam wraps it in its own exception
    with the remote traceback), or None."""
    found = re.findall(r"UsageError: (.+)", str(err))
    return UsageError(found[-1].strip()) if found else None


def write(run, output_dir, *, overwrite=False, pipeline_args=(), progress=True):
    """Runs the pipeline for a pretraining_run.Run; commits the shards and writes
    metadata.json. Returns the metadata dict.

    run.config["vocab_file"] is read here, on the driver, once: the workers
    get the tokenizer's files by value (beam_shipping.TokenizerFiles)."""
    with tempfile.TemporaryDirectory(prefix="kerasbert-staging-") as staging:
        return _write(run, output_dir, staging, overwrite, pipeline_args)


def driver_copy(vocab, pipeline_args=()):
    """beam_shipping.driver_copy with Beam's file systems configured by the
    pipeline options first (--hdfs_host, --s3_region_name, ...): the
    driver reads --vocab and lists --input before the pipeline exists."""
    FileSystems.set_options(PipelineOptions(list(pipeline_args)))
    return beam_shipping.driver_copy(vocab)


def _beam_pipeline(options):
    """beam.Pipeline(options); Beam's own checks of the options (a runner's
    missing or conflicting options) as one-line UsageErrors."""
    try:
        return beam.Pipeline(options=options)
    except ValueError as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        if len(lines) > 1 and lines[0].lower().startswith("pipeline has validation"):
            lines = lines[1:]
        raise UsageError(f"pipeline options: {lines[0] if lines else err}") from None


def _write(run, output_dir, staging, overwrite, pipeline_args):
    o = run.options
    runner = o["runner"]
    options = pipeline_options(runner, o["workers"], pipeline_args, staging_dir=staging)
    FileSystems.set_options(options)  # --hdfs_host, --s3_region_name, ... for the driver
    tokenizer = TokenizerFiles.read(run.config["vocab_file"])
    output_dir = output_dir.rstrip("/")
    check_paths(runner, run.inputs, output_dir)
    sources = match_sources(run.inputs, o["text_field"])
    local = not is_remote(output_dir)
    if local:
        # Local files are checked before anything is written, as `local`
        # does; remote ones fail the pipeline, which commits nothing.
        check_text_files([s[1] for s in sources if s[0] == "file" and not is_remote(s[1])]
                         + [spec for spec in run.inputs if spec.startswith("tfds:")])
        check_output_dir(output_dir, overwrite)
        created = not os.path.exists(output_dir)
        os.makedirs(output_dir, exist_ok=True)
    else:
        created = False
        if _final_files(output_dir) and not overwrite:
            raise UsageError(f"--output-dir {output_dir} already holds pretraining data; "
                             "pass --overwrite or pick another folder.")
    names = [shard_name(i, o["num_shards"], o["gzip"]) for i in range(o["num_shards"])]
    temp_dir = f"{output_dir}/.beam.tmp-{uuid.uuid4().hex}"
    started = time.time()
    try:
        if tokenizer.size > beam_shipping.INLINE_BYTES:
            tokenizer = tokenizer.stage(f"{temp_dir}/tokenizer")
        try:
            with _beam_pipeline(options) as pipeline:
                build_pipeline(pipeline, run, sources, temp_dir, names, tokenizer)
        except UsageError:
            raise
        except Exception as err:
            usage = _worker_error(err)
            if usage is not None:
                raise usage from None
            raise
        counts = dict(json.loads(_read_file(f"{temp_dir}/counts.json")))
        num_docs = json.loads(_read_file(f"{temp_dir}/documents.json"))
        check_produced(num_docs, sum(counts.values()), run.inputs)
        # Commit: older output goes first (metadata before shards, so no
        # metadata ever describes the wrong shards), then the renames, then
        # metadata.json from the pipeline's counts.
        for old in reversed(_final_files(output_dir)):
            if os.path.basename(old) not in counts:
                FileSystems.delete([old])
        FileSystems.rename([f"{temp_dir}/shards/{n}" for n in names],
                           [f"{output_dir}/{n}" for n in names])
    except BaseException:
        with contextlib.suppress(Exception):
            FileSystems.delete([temp_dir])
        if created:
            with contextlib.suppress(OSError):
                os.rmdir(output_dir)
        raise
    with contextlib.suppress(Exception):
        FileSystems.delete([temp_dir])
    metadata = run.metadata({n: counts[n] for n in names}, num_docs, time.time() - started)
    if local:
        meta_lib.write_metadata(output_dir, metadata)
    else:
        _write_json(metadata, f"{output_dir}/{meta_lib.METADATA_FILE}")
    return metadata
