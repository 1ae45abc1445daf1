#!/usr/bin/env python
"""Pretraining data pipeline: kerasbert vs its peers, on the same real text.

One run does, on one corpus and one vocabulary:

 1. corpus: >= --corpus-mb MB of real English prose prepared offline from the
    docstrings of the installed Python packages (site-packages, sorted paths,
    split into sentences by our sentence splitter, one document per module),
    with the multilingual sample of tests/text spread through it as extra
    documents; the original format (one sentence per line, a blank line
    between documents). Cached under --work-dir. One WordPiece vocabulary is
    built from it by our builder (kerasbert.text.build_wordpiece_vocab).
 2. writer: `kerasbert create-pretraining-data --workers W` vs tf-models-
    official's `official.nlp.data.create_pretraining_data` (the original
    google-research/bert script), same text, vocabulary and options, each in
    a fresh subprocess: input MB/s (end-to-end wall time, start-up included)
    and peak RSS (the process tree's summed RSS, polled with psutil), at a
    slice of S MB and of 4S MB (prefixes of the corpus at document
    boundaries); ours also on the whole corpus.
 3. reader: examples/s of our pretraining_dataset (stored masks, dynamic
    masking) vs Model Garden's BertPretrainDataLoader on the shards our
    writer made from the whole corpus (bench/reader_bench.py's measure()).
 4. tokenizer: MB/s of our WordPieceTokenizer (batched tf.data) vs HF
    `tokenizers` on the corpus's lines with the same vocabulary, in both
    settings of the special-token switch (off: "[MASK]" in text is text, HF
    with encode_special_tokens; on: both match special-token strings), ids
    compared on every line; with --tokenizer-baseline REF also our
    tokenizer as of git REF (its package extracted beside the cache and
    imported under another name), measured in the same interleaved passes:
    the speed of a change against the code before it.
 5. unigram (--unigram-only): tokens/s of our SentencePieceTokenizer with
    exact_unigram (our own Unigram lattice, the libraries' ids on every
    line) vs its default (tensorflow-text's op and its Viterbi) on the
    multilingual sample of tests/text, for an spiece.model (3,000 pieces
    trained by sentencepiece on a third of the sample, cased) and the
    Unigram tokenizer.json `tokenizers` converts from it: eager calls and a
    tf.data map, batches of 32; ids checked against the sentencepiece and
    `tokenizers` libraries on every line (the special-token switch off for
    the first, on for the second: as each library reads "[MASK]").

Prints one table (ours, peer, ours/peer) and the environment; --json OUT
writes everything (atomically). --quick: tiny sizes, a smoke test whose
numbers mean nothing. See bench/docs/data_bench.md.
"""

import argparse
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.add_paths("tests/text")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import beam_section  # noqa: E402
import reader_bench  # noqa: E402

DEFAULTS = dict(corpus_mb=20.0, slice_mb=2.0, dupe_factor=10, workers=2, vocab_size=30522,
                num_shards=4, tokenizer_mb=8.0, tokenizer_repeats=3, reader_batches=300,
                reader_repeats=3, batch_size=32, beam_mb=1024.0, beam_files=32,
                beam_dupe_factor=1, beam_shards=16, unigram_repeats=3)
QUICK = dict(corpus_mb=0.4, slice_mb=0.05, dupe_factor=1, workers=2, vocab_size=2000,
             num_shards=2, tokenizer_mb=0.1, tokenizer_repeats=1, reader_batches=5,
             reader_repeats=1, batch_size=8, beam_mb=0.4, beam_files=4, beam_dupe_factor=1,
             beam_shards=2, unigram_repeats=1)
# Options shared by both writers (the original script's defaults).
WRITER_OPTIONS = dict(max_seq_length=128, max_predictions_per_seq=20, masked_lm_prob=0.15,
                      short_seq_prob=0.1, random_seed=12345)
CORPUS_VERSION = 2  # Bump when the corpus recipe changes (invalidates caches).
MB = 2**20
POLL_S = 0.05


class BenchError(Exception):
    """A bad argument or a failed run; exits non-zero."""


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus-mb", type=float, help="size of the corpus (default 20)")
    p.add_argument("--slice-mb", type=float,
                   help="S: both writers run on the first S MB and 4S MB of the corpus "
                   "(default 2, i.e. 2 MB and 8 MB)")
    p.add_argument("--dupe-factor", type=int,
                   help="both writers' --dupe-factor (default 10, the original's)")
    p.add_argument("--workers", type=int, help="our writer's worker processes (default 2)")
    p.add_argument("--num-shards", type=int, help="output shards of each writer (default 4)")
    p.add_argument("--vocab-size", type=int, help="WordPiece vocabulary size (default 30522)")
    p.add_argument("--peer-full", action="store_true",
                   help="also run the peer writer on the whole corpus (slow)")
    p.add_argument("--tokenizer-mb", type=float,
                   help="MB of corpus lines for the tokenizer rows (default 8)")
    p.add_argument("--tokenizer-repeats", type=int, help="default 3")
    p.add_argument("--tokenizer-baseline", metavar="GIT_REF",
                   help="also measure our tokenizer as of this git commit (e.g. f4c7c22^), "
                   "interleaved with today's: the ratio today / then")
    p.add_argument("--tokenizer-only", action="store_true",
                   help="only the tokenizer rows (no writer, reader or Beam runs)")
    p.add_argument("--reader-batches", type=int, help="batches per reader run (default 300)")
    p.add_argument("--reader-repeats", type=int, help="default 3")
    p.add_argument("--batch-size", type=int, help="reader batch size (default 32)")
    p.add_argument("--work-dir", default=str(_common.REPO_ROOT / "bench" / "results" / "data_bench"),
                   help="corpus/vocabulary cache and writer outputs (default "
                   "bench/results/data_bench)")
    p.add_argument("--note", default="", help="free text recorded with the results")
    p.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    p.add_argument("--beam-mb", type=float,
                   help="Beam section: size of the resampled built-in corpus (default 1024); "
                   "S is its first quarter")
    p.add_argument("--beam-files", type=int, help="Beam section: its files (default 32)")
    p.add_argument("--beam-dupe-factor", type=int, help="Beam section: --dupe-factor (default 1)")
    p.add_argument("--beam-shards", type=int, help="Beam section: --num-shards (default 16)")
    p.add_argument("--no-beam", action="store_true", help="skip the Beam section")
    p.add_argument("--beam-only", action="store_true",
                   help="only the Beam section (no peer writer, reader or tokenizer runs)")
    p.add_argument("--unigram-only", action="store_true",
                   help="only the unigram section: exact_unigram vs the op's Viterbi")
    p.add_argument("--unigram-repeats", type=int, help="unigram section: default 3")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes, one repeat: a smoke test, not a measurement")
    args = p.parse_args(argv)
    for name, value in (QUICK if args.quick else DEFAULTS).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    for name in ("corpus_mb", "slice_mb", "tokenizer_mb", "beam_mb"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)}")
    for name in ("dupe_factor", "workers", "num_shards", "vocab_size", "tokenizer_repeats",
                 "reader_batches", "reader_repeats", "batch_size", "beam_files",
                 "beam_dupe_factor", "beam_shards", "unigram_repeats"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.beam_only and args.no_beam:
        p.error("--beam-only and --no-beam leave nothing to run")
    if sum((args.beam_only, args.tokenizer_only, args.unigram_only)) > 1:
        p.error("--beam-only, --tokenizer-only and --unigram-only exclude each other")
    if 4 * args.slice_mb > args.corpus_mb:
        p.error(f"4 x --slice-mb ({4 * args.slice_mb:g}) exceeds --corpus-mb {args.corpus_mb:g}")
    return args


# ---------------------------------------------------------------- corpus

def _iter_docstring_documents():
    """Documents (lists of sentences), one per module of site-packages, in
    sorted path order (deterministic for fixed installed versions). The
    walker and the prose filter are the built-in corpus's
    (kerasbert.data.default_corpus)."""
    from kerasbert.data import default_corpus

    root = sysconfig.get_paths()["purelib"]
    return default_corpus.iter_docstring_documents(default_corpus.python_files(root))


def _multilingual_documents(lines_per_doc=8):
    import multilingual_sample

    lines = multilingual_sample.multilingual_lines()
    lines = [" ".join(l.split()) for l in lines]  # One sentence per line: no tabs/newlines.
    lines = [l for l in lines if l]
    return [lines[i:i + lines_per_doc] for i in range(0, len(lines), lines_per_doc)]


def _doc_bytes(doc):
    return sum(len(s.encode("utf-8")) + 1 for s in doc) + 1


def prepare_corpus(work_dir, megabytes, log=print):
    """Writes (or reuses) the corpus file; returns (path, info dict).

    Every document's sentences on their own lines, a blank line after each
    document. The multilingual documents are spread evenly, so every prefix
    slice holds its share of them."""
    target = int(megabytes * MB)
    path = pathlib.Path(work_dir) / f"corpus-v{CORPUS_VERSION}-{megabytes:g}MB.txt"
    info_path = path.with_suffix(".json")
    if path.exists() and info_path.exists():
        return path, json.loads(info_path.read_text())
    log(f"preparing a {megabytes:g} MB corpus from site-packages docstrings ...")
    start = time.perf_counter()
    path.parent.mkdir(parents=True, exist_ok=True)
    ml_docs = _multilingual_documents()
    ml_bytes = sum(_doc_bytes(d) for d in ml_docs)
    if ml_bytes >= target:  # Tiny (--quick) corpora: a share of the sample only.
        keep = max(1, int(len(ml_docs) * 0.2 * target / ml_bytes))
        ml_docs, ml_bytes = ml_docs[:keep], sum(_doc_bytes(d) for d in ml_docs[:keep])
    # One multilingual document after every `every` bytes of docstring text.
    every = max(1, (target - ml_bytes) // (len(ml_docs) + 1))
    size = doc_size = 0
    counts = {"docstring_documents": 0, "multilingual_documents": 0, "sentences": 0}
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            def emit(doc, kind):
                nonlocal size
                f.write("\n".join(doc) + "\n\n")
                size += _doc_bytes(doc)
                counts[kind] += 1
                counts["sentences"] += len(doc)

            ml = iter(ml_docs)
            for doc in _iter_docstring_documents():
                emit(doc, "docstring_documents")
                doc_size += _doc_bytes(doc)
                while doc_size >= every * (counts["multilingual_documents"] + 1):
                    extra = next(ml, None)
                    if extra is None:
                        break
                    emit(extra, "multilingual_documents")
                if size >= target:
                    break
            for extra in ml:
                emit(extra, "multilingual_documents")
        if size < target:
            raise BenchError(f"site-packages holds only {size / MB:.1f} MB of docstring prose; "
                             f"--corpus-mb {megabytes:g} is too large")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    info = dict(counts, megabytes=size / MB, source="site-packages docstrings + "
                "tests/text/multilingual_sample.py", seconds=time.perf_counter() - start)
    _common.write_json(info_path, info)
    log(f"  {size / MB:.1f} MB, {counts['docstring_documents']:,} docstring + "
        f"{counts['multilingual_documents']:,} multilingual documents "
        f"({info['seconds']:.0f}s)")
    return path, info


def write_slice(corpus, megabytes, out_path):
    """The corpus's first documents up to `megabytes` (cut at a document
    boundary, at least that many bytes); returns the bytes written."""
    target = int(megabytes * MB)
    size = 0
    with open(corpus, encoding="utf-8") as src, open(out_path, "w", encoding="utf-8") as dst:
        for line in src:
            dst.write(line)
            size += len(line.encode("utf-8"))
            if size >= target and not line.strip():
                break
    return size


def prepare_vocab(corpus, work_dir, vocab_size, log=print):
    """One vocabulary for everything, built by our builder (cached by the
    corpus's hash and the size)."""
    from kerasbert.text import build_wordpiece_vocab
    from kerasbert.text import write_vocab

    h = hashlib.sha256()
    with open(corpus, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    path = pathlib.Path(work_dir) / f"vocab-{h.hexdigest()[:12]}-{vocab_size}.txt"
    if not path.exists():
        log(f"building a {vocab_size:,}-token vocabulary with kerasbert.text ...")
        start = time.perf_counter()
        tokens = build_wordpiece_vocab([corpus], vocab_size, lower_case=True,
                                       show_progress=False)
        tmp = path.with_name(path.name + ".tmp")
        write_vocab(tokens, tmp)
        os.replace(tmp, path)
        log(f"  {len(tokens):,} tokens ({time.perf_counter() - start:.0f}s)")
    with open(path, encoding="utf-8") as f:
        return path, sum(1 for _ in f)


# ---------------------------------------------------------------- writers


def _tree_memory(proc):
    """(summed RSS, summed PSS, largest RSS) of `proc` and its descendants.
    RSS counts pages shared between processes (a forked worker's copy of
    the parent's TensorFlow) once per process; PSS splits them."""
    import psutil

    try:
        procs = [proc] + proc.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0, 0, 0
    rss = pss = one = 0
    for p in procs:
        try:
            m = p.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        rss += m.rss
        pss += getattr(m, "pss", m.rss)
        one = max(one, m.rss)
    return rss, pss, one


def run_measured(cmd, log_path, cwd=None):
    """Runs `cmd` in a fresh process, polling the memory of its process tree
    every POLL_S seconds. Returns {"seconds", "peak_rss", "peak_pss",
    "peak_rss_one"} (bytes; peaks of the tree's sums). Raises BenchError
    with the log's tail on a non-zero exit."""
    import psutil

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    peaks = [0, 0, 0]
    with open(log_path, "w") as log:
        start = time.perf_counter()
        proc = psutil.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env)
        while proc.poll() is None:
            peaks = [max(a, b) for a, b in zip(peaks, _tree_memory(proc))]
            time.sleep(POLL_S)
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        tail = pathlib.Path(log_path).read_text(errors="replace")[-3000:]
        raise BenchError(f"{' '.join(map(str, cmd[:4]))} ... exited with {proc.returncode}; "
                         f"log {log_path}:\n{tail}")
    return {"seconds": wall, "peak_rss": peaks[0], "peak_pss": peaks[1],
            "peak_rss_one": peaks[2]}


def ours_command(input_path, vocab, out_dir, args):
    o = WRITER_OPTIONS
    return [sys.executable, "-c",
            "import sys; from kerasbert.cli import main; sys.exit(main(sys.argv[1:]))",
            "create-pretraining-data", "--input", str(input_path), "--vocab", str(vocab),
            "--output-dir", str(out_dir), "--input-format", "sentences",
            "--max-seq-length", str(o["max_seq_length"]),
            "--max-predictions-per-seq", str(o["max_predictions_per_seq"]),
            "--masked-lm-prob", str(o["masked_lm_prob"]),
            "--short-seq-prob", str(o["short_seq_prob"]),
            "--random-seed", str(o["random_seed"]), "--do-lower-case",
            "--dupe-factor", str(args.dupe_factor), "--num-shards", str(args.num_shards),
            "--workers", str(args.workers), "--overwrite", "--no-progress"]


def peer_command(input_path, vocab, out_dir, args):
    o = WRITER_OPTIONS
    outputs = ",".join(str(pathlib.Path(out_dir) / f"peer-{i:05d}.tfrecord")
                       for i in range(args.num_shards))
    return [sys.executable, "-m", "official.nlp.data.create_pretraining_data",
            f"--input_file={input_path}", f"--output_file={outputs}",
            f"--vocab_file={vocab}", "--do_lower_case=True",
            f"--max_seq_length={o['max_seq_length']}",
            f"--max_predictions_per_seq={o['max_predictions_per_seq']}",
            f"--masked_lm_prob={o['masked_lm_prob']}",
            f"--short_seq_prob={o['short_seq_prob']}",
            f"--dupe_factor={args.dupe_factor}", f"--random_seed={o['random_seed']}"]


def count_records(pattern):
    import tensorflow as tf

    files = tf.io.gfile.glob(pattern)
    return sum(1 for f in files for _ in tf.data.TFRecordDataset(f))


def run_writer(who, input_path, input_bytes, vocab, out_dir, args, log=print):
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    make = ours_command if who == "ours" else peer_command
    m = run_measured(make(input_path, vocab, out_dir, args), str(out_dir) + ".log",
                     cwd=str(_common.REPO_ROOT))
    pattern = os.path.join(out_dir, "part-*" if who == "ours" else "peer-*")
    result = {
        "writer": who, "input_mb": input_bytes / MB, "seconds": m["seconds"],
        "mb_per_s": input_bytes / MB / m["seconds"], "peak_rss_mb": m["peak_rss"] / MB,
        "peak_pss_mb": m["peak_pss"] / MB, "peak_rss_one_process_mb": m["peak_rss_one"] / MB,
        "instances": count_records(pattern),
    }
    if who == "ours":
        meta = json.loads((pathlib.Path(out_dir) / "metadata.json").read_text())
        # Time inside create_pretraining_data, after the workers started.
        result["seconds_after_startup"] = meta["seconds"]
    log(f"  {who:4s} {result['input_mb']:6.2f} MB: {result['seconds']:7.1f}s  "
        f"{result['mb_per_s']:7.3f} MB/s  peak RSS {result['peak_rss_mb']:6.0f} MB  "
        f"PSS {result['peak_pss_mb']:6.0f} MB  "
        f"{result['instances']:,} instances")
    return result


# ---------------------------------------------------------------- tokenizer


def tokenizer_lines(corpus, megabytes):
    """Non-empty corpus lines up to `megabytes`: every line is compared,
    special-token strings and words over 100 characters included (both
    tokenizers keep special-token strings as text and count characters)."""
    lines, size = [], 0
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            lines.append(line)
            size += len(line.encode("utf-8")) + 1
            if size >= megabytes * MB:
                break
    return lines


def baseline_text_module(ref, work_dir):
    """kerasbert.text as of git `ref`: the package extracted (`git archive`)
    under work_dir, renamed kerasbert_baseline (its imports rewritten) so
    that it imports beside today's. Returns the module."""
    import importlib

    try:
        sha = subprocess.run(["git", "-C", str(_common.REPO_ROOT), "rev-parse", "--verify",
                              f"{ref}^{{commit}}"], check=True, capture_output=True,
                             text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as error:
        raise BenchError(f"--tokenizer-baseline {ref}: not a commit of this repository "
                         f"({getattr(error, 'stderr', error)!s:.200})") from None
    root = pathlib.Path(work_dir) / f"baseline-{sha[:12]}"
    package = root / "kerasbert_baseline"
    if not package.is_dir():
        tmp = pathlib.Path(tempfile.mkdtemp(prefix=".baseline.", dir=work_dir))
        try:
            archive = subprocess.run(["git", "-C", str(_common.REPO_ROOT), "archive", sha,
                                      "kerasbert"], check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
            for path in (tmp / "kerasbert").rglob("*.py"):
                text = path.read_text(encoding="utf-8")
                path.write_text(re.sub(r"\bkerasbert(?=[.\s]|$)", "kerasbert_baseline", text,
                                       flags=re.M), encoding="utf-8")
            (tmp / "kerasbert").rename(tmp / "kerasbert_baseline")
            os.replace(tmp, root)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
    sys.path.insert(0, str(root))
    return importlib.import_module("kerasbert_baseline.text")


def measure_tokenizers(lines, vocab_file, repeats, baseline=None, batch_size=1024):
    """MB/s of our WordPieceTokenizer (uncased, batched tf.data) with the
    special-token switch off and on, of HF `tokenizers` in the same two
    settings (encode_special_tokens on / off), and of `baseline` (a
    kerasbert.text module of another commit, its default tokenizer) when
    given: `repeats` interleaved passes each, median. Ids are compared on
    every line: ours off with HF off, ours on with HF on, the baseline with
    ours off.

    Returns a dict: megabytes, lines, and per contender ("ours", "hf",
    "ours_on", "hf_on", "baseline") its median MB/s ("<name>_mb_s") and
    rates; identical / identical_on / identical_baseline (line counts) and
    up to 10 differing lines each."""
    import tensorflow as tf
    import tokenizers

    from kerasbert.text import WordPieceTokenizer

    megabytes = sum(len(line.encode("utf-8")) + 1 for line in lines) / MB
    batches = [lines[i:i + batch_size] for i in range(0, len(lines), batch_size)]

    def ours(tokenizer):
        return (tf.data.Dataset.from_tensor_slices(tf.constant(lines)).batch(batch_size)
                .map(tokenizer.tokenize_ids, num_parallel_calls=tf.data.AUTOTUNE)
                .prefetch(tf.data.AUTOTUNE))

    def hf(match_specials):
        peer = tokenizers.BertWordPieceTokenizer(str(vocab_file), lowercase=True,
                                                 strip_accents=True)
        peer._tokenizer.encode_special_tokens = not match_specials
        return peer

    datasets = {"ours": ours(WordPieceTokenizer(vocab_file, lower_case=True)),
                "ours_on": ours(WordPieceTokenizer(vocab_file, lower_case=True,
                                                   special_tokens_in_strings=True))}
    if baseline is not None:
        datasets["baseline"] = ours(baseline.WordPieceTokenizer(str(vocab_file),
                                                                lower_case=True))
    peers = {"hf": hf(False), "hf_on": hf(True)}

    ids = {name: [row for batch in dataset for row in batch.to_list()]
           for name, dataset in datasets.items()}
    ids.update({name: [e.ids for b in batches
                       for e in peer.encode_batch(b, add_special_tokens=False)]
                for name, peer in peers.items()})

    def timed(loop):
        def rate():
            start = time.perf_counter()
            loop()
            return megabytes / (time.perf_counter() - start)
        return rate

    runs = {name: timed(lambda d=dataset: [None for _ in d]) for name, dataset in datasets.items()}
    runs.update({name: timed(lambda p=peer: [p.encode_batch(b, add_special_tokens=False)
                                             for b in batches])
                 for name, peer in peers.items()})
    rates = _common.interleaved(runs, repeats)
    # A pass starts a new iterator, which optimizes the map function's graph
    # anew: its fixed cost (once per epoch in training), measured alone as
    # the time to the first batch of a one-batch pass.
    first = {name: [] for name in datasets}
    for _ in range(repeats):
        for name, dataset in datasets.items():
            start = time.perf_counter()
            next(iter(dataset.take(1)))
            first[name].append(time.perf_counter() - start)
    result = {"megabytes": megabytes, "lines": len(lines), "batch_size": batch_size,
              "repeats": repeats,
              "first_batch_s": {name: _common.median(v) for name, v in first.items()}}
    for name, values in rates.items():
        result[f"{name}_mb_s"] = _common.median(values)
        result[f"{name}_mb_s_all"] = values
    for suffix, a, b in (("", "ours", "hf"), ("_on", "ours_on", "hf_on"),
                         ("_baseline", "baseline", "ours")):
        if a in ids:
            differing = [i for i, (x, y) in enumerate(zip(ids[a], ids[b])) if list(x) != list(y)]
            result[f"identical{suffix}"] = len(lines) - len(differing)
            result[f"differing{suffix}"] = [(i, lines[i]) for i in differing[:10]]
    return result


def tokenizer_section(corpus, vocab, work, args, log):
    """The tokenizer rows' measurement (fails where ours and HF differ)."""
    log("tokenizers:")
    baseline = (baseline_text_module(args.tokenizer_baseline, work)
                if args.tokenizer_baseline else None)
    lines = tokenizer_lines(corpus, args.tokenizer_mb)
    tok = measure_tokenizers(lines, vocab, args.tokenizer_repeats, baseline)
    log("  first batch of a new iterator (its set-up): " + ", ".join(
        f"{name} {seconds * 1000:.0f} ms" for name, seconds in tok["first_batch_s"].items()))
    log(f"  switch off: ours {tok['ours_mb_s']:.2f} MB/s  HF {tok['hf_mb_s']:.2f} MB/s  "
        f"identical ids {tok['identical']:,}/{tok['lines']:,}")
    log(f"  switch on:  ours {tok['ours_on_mb_s']:.2f} MB/s  HF {tok['hf_on_mb_s']:.2f} MB/s  "
        f"identical ids {tok['identical_on']:,}/{tok['lines']:,}")
    if baseline is not None:
        log(f"  ours as of {args.tokenizer_baseline}: {tok['baseline_mb_s']:.2f} MB/s, "
            f"identical ids to today's {tok['identical_baseline']:,}/{tok['lines']:,}")
    for suffix in ("", "_on"):
        if tok[f"identical{suffix}"] != tok["lines"]:
            raise BenchError(f"token ids differ from HF on "
                             f"{tok['lines'] - tok[f'identical{suffix}']} lines (switch "
                             f"{'on' if suffix else 'off'}), e.g. {tok[f'differing{suffix}'][:3]}")
    tok["baseline_ref"] = args.tokenizer_baseline
    return tok


# ---------------------------------------------------------------- unigram

UNIGRAM_BATCH = 32


def unigram_models(work, lines, log):
    """(spiece.model directory, tokenizer.json directory) of the sample:
    sentencepiece's trainer on every third line (3,000 pieces, cased, as
    tests/text/test_source_tokenizer_parity.py), `tokenizers`' converter."""
    root = work / "unigram"
    model, json_only = root / "model", root / "json_only"
    if (json_only / "tokenizer.json").exists():
        return model, json_only
    import sentencepiece.sentencepiece_model_pb2 as model_pb2
    from tokenizers import AddedToken

    from kerasbert.text import train_sentencepiece

    log("unigram: training the sample's spiece.model ...")
    model.mkdir(parents=True, exist_ok=True)
    (root / "corpus.txt").write_text("\n".join(lines[::3]) + "\n", encoding="utf-8")
    train_sentencepiece([str(root / "corpus.txt")], 3000, str(model / "spiece"),
                        lower_case=False)
    sys.modules.setdefault("sentencepiece_model_pb2", model_pb2)  # the converter's import
    from tokenizers.implementations import SentencePieceUnigramTokenizer

    converted = SentencePieceUnigramTokenizer.from_spm(str(model / "spiece.model"))
    converted.add_special_tokens(["<pad>", "<unk>", "[CLS]", "[SEP]",
                                  AddedToken("[MASK]", lstrip=True)])
    tmp = root / ".json_only"
    tmp.mkdir(exist_ok=True)
    converted.save(str(tmp / "tokenizer.json"))
    for directory in (model, tmp):
        (directory / "config.json").write_text(json.dumps({"model_type": "big_bird"}))
    os.replace(tmp, json_only)
    return model, json_only


def measure_unigram(work, repeats, quick, log):
    """tokens/s of exact_unigram and of the default (the op) per model
    file, eager and in a tf.data map (batches of 32), interleaved passes,
    median; ids of exact_unigram against the library on every line."""
    import sentencepiece
    import tensorflow as tf
    import tokenizers

    import multilingual_sample
    from kerasbert.text import load_tokenizer

    lines = multilingual_sample.multilingual_lines(min_lines=3000, faker_per_locale=40)
    model, json_only = unigram_models(work, lines, log)
    if quick:
        lines = lines[::25]
    os.environ["KERASBERT_CACHE"] = str(work / "unigram" / "cache")
    library = sentencepiece.SentencePieceProcessor(model_file=str(model / "spiece.model"))
    reference = tokenizers.Tokenizer.from_file(str(json_only / "tokenizer.json"))
    expected = {"spiece.model": [library.encode(line) for line in lines],
                "tokenizer.json": [e.ids for e in reference.encode_batch(
                    lines, add_special_tokens=False)]}
    batches = [lines[i:i + UNIGRAM_BATCH] for i in range(0, len(lines), UNIGRAM_BATCH)]
    runs, result = {}, {"lines": len(lines), "batch_size": UNIGRAM_BATCH, "repeats": repeats}
    # The special-token switch as each library reads such strings by default:
    # text for sentencepiece, matched for tokenizers.
    for name, directory, on in (("spiece.model", model, False),
                                ("tokenizer.json", json_only, True)):
        for exact in (True, False):
            tokenizer = load_tokenizer(str(directory), exact_unigram=exact,
                                       special_tokens_in_strings=on)
            key = f"{name} {'exact' if exact else 'op'}"
            ids = tokenizer.tokenize_ids(lines).to_list()
            result[f"{key} tokens"] = tokens = sum(map(len, ids))
            result[f"{key} identical"] = sum(a == b for a, b in zip(ids, expected[name]))
            dataset = (tf.data.Dataset.from_tensor_slices(lines).batch(UNIGRAM_BATCH)
                       .map(tokenizer.tokenize_ids, num_parallel_calls=tf.data.AUTOTUNE)
                       .prefetch(tf.data.AUTOTUNE))

            def eager(t=tokenizer, n=tokens):
                start = time.perf_counter()
                for batch in batches:
                    t.tokenize_ids(batch)
                return n / (time.perf_counter() - start)

            def mapped(d=dataset, n=tokens):
                start = time.perf_counter()
                for _ in d:
                    pass
                return n / (time.perf_counter() - start)

            eager(), mapped()  # traced, warmed
            runs[f"{key} eager"], runs[f"{key} tf.data"] = eager, mapped
    for name, rates in _common.interleaved(runs, repeats).items():
        result[f"{name} tokens/s"] = _common.median(rates)
        result[f"{name} tokens/s all"] = rates
    for name in expected:
        log(f"  {name}: exact_unigram ids identical to the library on "
            f"{result[f'{name} exact identical']:,}/{len(lines):,} lines, the op's on "
            f"{result[f'{name} op identical']:,}")
        if result[f"{name} exact identical"] != len(lines):
            raise BenchError(f"exact_unigram differs from the library on "
                             f"{len(lines) - result[f'{name} exact identical']} lines ({name})")
    return result


def unigram_rows(u):
    """ours = exact_unigram, peer = the default (the op's Viterbi)."""
    return [_row("unigram", f"tokens/s, {name}, {mode} (batch {u['batch_size']})",
                 u[f"{name} exact {mode} tokens/s"], u[f"{name} op {mode} tokens/s"], "tok/s")
            for name in ("spiece.model", "tokenizer.json") for mode in ("eager", "tf.data")]


# ---------------------------------------------------------------- report


def environment(args):
    import tensorflow as tf

    env = _common.base_environment()
    versions = {}
    for module in ("tensorflow_text", "tokenizers", "psutil", "numpy"):
        try:
            versions[module] = __import__(module).__version__
        except (ImportError, AttributeError):
            versions[module] = None
    try:
        from importlib.metadata import version

        versions["tf_models_official"] = version("tf-models-official")
    except Exception:  # noqa: BLE001 - a missing version is not an error here.
        versions["tf_models_official"] = None
    import kerasbert

    env.update(tensorflow=tf.__version__, kerasbert=getattr(kerasbert, "__version__", "?"),
               **versions, note=args.note, loadavg_start=_common.LOAD_AT_START.get("value"))
    return env


def _row(section, name, ours, peer, unit, better="higher", note=""):
    ratio = ours / peer if ours is not None and peer else None
    return {"section": section, "row": name, "ours": ours, "peer": peer, "unit": unit,
            "ratio": ratio, "better": better, "note": note}


def build_rows(results, args):
    rows = []
    w = results["writer"]
    d = args.dupe_factor
    for key in ("S", "4S"):
        o, p = w["ours"][key], w["peer"][key]
        rows.append(_row("writer", f"input MB/s, {o['input_mb']:.1f} MB (dupe {d})",
                         o["mb_per_s"], p["mb_per_s"], "MB/s"))
    for kind in ("RSS", "PSS"):
        field = f"peak_{kind.lower()}_mb"
        for key in ("S", "4S"):
            o, p = w["ours"][key], w["peer"][key]
            rows.append(_row("writer", f"peak {kind}, {o['input_mb']:.1f} MB", o[field],
                             p[field], "MB", better="lower"))
        growth = {who: w[who]["4S"][field] / w[who]["S"][field] for who in ("ours", "peer")}
        rows.append(_row("writer", f"peak {kind} growth, 4x corpus", growth["ours"],
                         growth["peer"], "x", better="lower"))
    full_o, full_p = w["ours"]["full"], w["peer"].get("full")
    rows.append(_row("writer", f"input MB/s, {full_o['input_mb']:.1f} MB (dupe {d})",
                     full_o["mb_per_s"], full_p and full_p["mb_per_s"], "MB/s"))
    rows.append(_row("writer", f"peak RSS, {full_o['input_mb']:.1f} MB", full_o["peak_rss_mb"],
                     full_p and full_p["peak_rss_mb"], "MB", better="lower"))
    rows.append(_row("writer", f"peak PSS, {full_o['input_mb']:.1f} MB", full_o["peak_pss_mb"],
                     full_p and full_p["peak_pss_mb"], "MB", better="lower"))
    r = results["reader"]
    peer = _common.median(r[reader_bench.PEER])
    rows.append(_row("reader", f"examples/s, stored masks (batch {args.batch_size})",
                     _common.median(r[reader_bench.OURS]), peer, "ex/s"))
    rows.append(_row("reader", "examples/s, ours dynamic masking",
                     _common.median(r[reader_bench.OURS_DYNAMIC]), peer, "ex/s"))
    return rows + tokenizer_rows(results["tokenizer"], every=False)


def tokenizer_rows(t, every=True):
    """The tokenizer's table rows: switch off against HF; with `every`
    (--tokenizer-only) also switch on, and ours against the baseline
    commit (a full run prints those in a note under the table)."""
    rows = [_row("tokenizer", f"MB/s, {t['lines']:,} lines ({t['megabytes']:.1f} MB)",
                 t["ours_mb_s"], t["hf_mb_s"], "MB/s")]
    if not every:
        return rows
    rows.append(_row("tokenizer", "MB/s, special-token strings matched", t["ours_on_mb_s"],
                     t["hf_on_mb_s"], "MB/s"))
    if t.get("baseline_ref"):
        ref = t["baseline_ref"]
        rows.append(_row("tokenizer", f"MB/s, off, peer = ours at {ref}",
                         t["ours_mb_s"], t["baseline_mb_s"], "MB/s"))
        rows.append(_row("tokenizer", f"MB/s, on, peer = ours at {ref}",
                         t["ours_on_mb_s"], t["baseline_mb_s"], "MB/s"))
    return rows


def _fmt(value, unit):
    if value is None:
        return "-"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "s":
        return f"{value:.1f}"
    if unit == "MB/s":
        return f"{value:.3f}" if value < 10 else f"{value:.1f}"
    return f"{value:,.0f}"


def format_table(rows, env, meta):
    if not meta["tokenizer"]:  # --beam-only
        lines = ["kerasbert pretraining-data writer: Apache Beam (DirectRunner) vs the local "
                 "writer (--beam-only)"]
    elif meta["args"]["tokenizer_only"]:
        lines = [f"kerasbert tokenizer vs HF tokenizers (--tokenizer-only)  [corpus "
                 f"{meta['corpus']['megabytes']:.1f} MB real text, vocab {meta['vocab_size']:,}, "
                 "uncased, tf.data batches of 1024]"]
    else:
        lines = [
            f"kerasbert data pipeline vs peers  [corpus {meta['corpus']['megabytes']:.1f} MB "
            f"real text, vocab {meta['vocab_size']:,}, seq {WRITER_OPTIONS['max_seq_length']}, "
            f"P {WRITER_OPTIONS['max_predictions_per_seq']}, dupe {meta['dupe_factor']}, "
            f"ours --workers {meta['workers']}, {meta['num_shards']} shards]",
            "peers: writer = tf-models-official create_pretraining_data.py; reader = Model "
            "Garden BertPretrainDataLoader; tokenizer = HF tokenizers BertWordPieceTokenizer",
        ]
    header = (f"{'section':<10} {'row':<40} {'ours':>10} {'peer':>10} {'ours/peer':>10}  "
              f"{'better':<6}")
    lines += [header, "-" * len(header)]
    for r in rows:
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] is not None else "-"
        unit = r["unit"]
        lines.append(f"{r['section']:<10} {r['row']:<40} {_fmt(r['ours'], unit):>10} "
                     f"{_fmt(r['peer'], unit):>10} {ratio:>10}  {r['better']:<6}")
    lines.append("")
    if meta["tokenizer"] and not meta["args"]["tokenizer_only"]:
        lines.append("writer MB/s = input MB / wall time of a fresh process (start-up and TF "
                     "import included); peak RSS/PSS = peak of the process tree's summed "
                     "RSS/PSS (MB = 2^20 B; RSS counts pages shared by forked processes once "
                     "per process, PSS splits them).")
        lines.append("reader: both peers read the shards our writer made from the whole "
                     "corpus; ours+dynamic re-masks in-graph.")
    b = meta.get("beam")
    if b:
        hours = ", ".join(f"{n} cores {h:.2f} h" for n, h in b["extrapolated_16gb_hours"].items())
        lines.append(
            f"beam: ours = `--runner direct` (Apache Beam DirectRunner, multi-process, "
            f"{b['workers']} workers), peer = `--runner local --workers {b['workers']}`; "
            f"{b['files']} files of the resampled built-in corpus, dupe {b['dupe_factor']}, "
            f"{b['num_shards']} shards; RSS per worker = the largest worker process's peak "
            "(local: forked from a forkserver that holds TensorFlow, whose pages they share: "
            "compare the PSS of all processes); "
            "start-up and steady MB/s from the two sizes (t = start-up + MB / rate).")
        lines.append(f"beam, EXTRAPOLATED (not measured) for a 16 GB corpus at the measured "
                     f"per-core rate, linear scaling assumed: {hours}.")
    t = meta["tokenizer"]
    if t:
        if not meta["args"]["tokenizer_only"]:
            lines.append(f"tokenizer, special-token strings matched: ours {t['ours_on_mb_s']:.2f} "
                         f"MB/s, HF {t['hf_on_mb_s']:.2f} MB/s "
                         f"({t['ours_on_mb_s'] / t['hf_on_mb_s']:.2f}x)"
                         + (f"; ours at {t['baseline_ref']}: {t['baseline_mb_s']:.2f} MB/s "
                            f"(today / then: off {t['ours_mb_s'] / t['baseline_mb_s']:.2f}x, on "
                            f"{t['ours_on_mb_s'] / t['baseline_mb_s']:.2f}x)"
                            if t.get("baseline_ref") else "") + ".")
        lines.append(f"tokenizer ids identical on {t['identical']:,}/{t['lines']:,} lines with "
                     f"the switch off (special-token strings are text in both) and on "
                     f"{t['identical_on']:,}/{t['lines']:,} with it on (matched in both); "
                     f"median of {t['repeats']} interleaved passes.")
        lines.append("tokenizer MB/s = a whole pass on a new iterator (as an epoch); its fixed "
                     "set-up, the first batch of a one-batch pass: " + ", ".join(
                         f"{name} {seconds * 1000:.0f} ms"
                         for name, seconds in t["first_batch_s"].items()) + ".")
        if t.get("baseline_ref"):
            lines.append(f"tokenizer baseline: kerasbert.text as of {t['baseline_ref']} (its "
                         f"default: switch off), ids identical to today's off on "
                         f"{t['identical_baseline']:,}/{t['lines']:,} lines.")
    lines.append(
        "env: " + " ".join(f"{k}={env.get(k)}" for k in (
            "tensorflow", "tensorflow_text", "tf_models_official", "tokenizers", "python",
            "cpu_count")) + f" loadavg(start/end)={env['loadavg_start']}/{env.get('loadavg_end')}")
    lines.append(f"platform: {env['platform']}")
    if env.get("note"):
        lines.append(f"note: {env['note']}")
    return "\n".join(lines)


def format_unigram_table(rows, env, u):
    lines = [f"kerasbert SentencePieceTokenizer: exact_unigram (ours) vs the op's Viterbi (peer, "
             f"the default)  [multilingual sample, {u['lines']:,} lines, {u['repeats']} "
             "interleaved passes, median]"]
    header = f"{'section':<10} {'row':<46} {'ours':>10} {'peer':>10} {'ours/peer':>10}"
    lines += [header, "-" * len(header)]
    for r in rows:
        lines.append(f"{r['section']:<10} {r['row']:<46} {r['ours']:>10,.0f} {r['peer']:>10,.0f} "
                     f"{r['ratio']:>9.2f}x")
    lines.append("")
    for name in ("spiece.model", "tokenizer.json"):
        lines.append(f"{name}: ids identical to the library (sentencepiece / tokenizers) on "
                     f"{u[f'{name} exact identical']:,}/{u['lines']:,} lines with exact_unigram, "
                     f"{u[f'{name} op identical']:,} with the op.")
    lines.append("env: " + " ".join(f"{k}={env.get(k)}" for k in (
        "tensorflow", "tensorflow_text", "tokenizers", "python", "cpu_count"))
        + f" loadavg(start/end)={env['loadavg_start']}/{env.get('loadavg_end')}")
    if env.get("note"):
        lines.append(f"note: {env['note']}")
    return "\n".join(lines)


def peer_sections(work, corpus, vocab, args, log):
    """The writer, reader and tokenizer sections: (results, slices)."""
    inputs = {}
    for key, mb in (("S", args.slice_mb), ("4S", 4 * args.slice_mb)):
        path = work / f"slice-{key}.txt"
        inputs[key] = (path, write_slice(corpus, mb, path))
    inputs["full"] = (corpus, corpus.stat().st_size)

    log(f"writers (dupe {args.dupe_factor}, ours --workers {args.workers}):")
    writer = {"ours": {}, "peer": {}}
    plan = [("ours", "S"), ("peer", "S"), ("peer", "4S"), ("ours", "4S"), ("ours", "full")]
    if args.peer_full:
        plan.append(("peer", "full"))
    for who, key in plan:
        path, size = inputs[key]
        writer[who][key] = run_writer(who, path, size, vocab, work / f"out-{who}-{key}", args,
                                      log)

    log("readers (on our writer's shards of the whole corpus):")
    pattern = str(work / "out-ours-full" / "part-*")
    reader = reader_bench.measure(pattern, str(vocab), WRITER_OPTIONS["max_seq_length"],
                                  WRITER_OPTIONS["max_predictions_per_seq"], args.batch_size,
                                  args.reader_batches, args.reader_repeats)
    for name, values in reader.items():
        log(f"  {name:24s} {_common.median(values):10.0f} examples/s")

    tok = tokenizer_section(corpus, vocab, work, args, log)
    return {"writer": writer, "reader": reader, "tokenizer": tok}, inputs


def run(args, log=print):
    work = pathlib.Path(args.work_dir) / ("quick" if args.quick else "default")
    work.mkdir(parents=True, exist_ok=True)
    if args.unigram_only:
        env = environment(args)
        log(f"unigram (exact_unigram vs the op's Viterbi, batches of {UNIGRAM_BATCH}):")
        results = {"unigram": measure_unigram(work, args.unigram_repeats, args.quick, log)}
        env["loadavg_end"] = _common.loadavg()
        rows = unigram_rows(results["unigram"])
        table = format_unigram_table(rows, env, results["unigram"])
        log("")
        log(table)
        payload = {"env": env, "meta": {"args": vars(args)}, "rows": rows, "results": results,
                   "table": table}
        if args.json:
            _common.write_json(args.json, payload)
            log(f"wrote {args.json}")
        return payload
    corpus, corpus_info = prepare_corpus(work, args.corpus_mb, log)
    vocab, vocab_size = prepare_vocab(corpus, work, args.vocab_size, log)
    env = environment(args)

    if args.tokenizer_only:
        results, inputs = {"tokenizer": tokenizer_section(corpus, vocab, work, args, log)}, {}
    else:
        results, inputs = ({}, {}) if args.beam_only else peer_sections(
            work, corpus, vocab, args, log)
    if not args.no_beam and not args.tokenizer_only:
        log(f"beam (DirectRunner, {args.workers} worker processes) vs local "
            f"(--workers {args.workers}), resampled built-in corpus, dupe "
            f"{args.beam_dupe_factor}:")
        results["beam"] = beam_section.measure(work, vocab, args, log)
        results["beam"]["extrapolated_16gb_hours"] = beam_section.extrapolate(results["beam"])
    env["loadavg_end"] = _common.loadavg()
    rows = ([] if args.beam_only else tokenizer_rows(results["tokenizer"]) if args.tokenizer_only
            else build_rows(results, args))
    if "beam" in results:
        rows += beam_section.rows(results["beam"], _row)
    meta = {"corpus": corpus_info, "vocab_size": vocab_size, "dupe_factor": args.dupe_factor,
            "workers": args.workers, "num_shards": args.num_shards,
            "writer_options": WRITER_OPTIONS, "tokenizer": results.get("tokenizer"),
            "slices_mb": {k: v[1] / MB for k, v in inputs.items()},
            "beam": results.get("beam"),
            "args": vars(args)}
    table = format_table(rows, env, meta)
    log("")
    log(table)
    payload = {"env": env, "meta": meta, "rows": rows, "results": results, "table": table}
    if args.json:
        _common.write_json(args.json, payload)
        log(f"wrote {args.json}")
    return payload


def main(argv=None):
    return _common.timed_main(parse_args, run, argv)


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        print(f"data_bench: error: {e}", file=sys.stderr)
        sys.exit(2)
