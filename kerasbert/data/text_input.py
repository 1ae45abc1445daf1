"""Input readers for pretraining-data creation: each yields documents.

A document is a list of sentence strings. Everything streams (one line or
one TFDS example at a time); no corpus is ever held in memory.

Inputs:
  * a text file in the ORIGINAL format: one sentence per line, a blank line
    between documents;
  * a text file of PLAIN PARAGRAPHS: paragraphs separated by blank lines,
    each a document, split into sentences by `split_sentences`. A paragraph
    may be hard-wrapped over several lines (a sentence continues across a
    line break): its lines are joined first (`join_wrapped_lines`). A block
    whose every line but the last ends a sentence is read as one paragraph
    per line instead (files with one unwrapped paragraph per line);
  * `tfds:NAME[:SPLIT]` with a text field: each example is a document, its
    text split into paragraphs at newlines and then into sentences.

Text files must be UTF-8 (a BOM is dropped): a file with a byte that does
not decode is refused, naming the file and the byte's offset, never read
with replacement characters (`kerasbert.text.text_files`).
"""

import contextlib
import glob
import os
import re

from kerasbert.errors import UsageError
from kerasbert.text.text_files import check_utf8_text
from kerasbert.text.text_files import read_lines

FORMATS = ("auto", "sentences", "paragraphs")

# Words after which a period does not end a sentence.
ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st mt vs etc e.g i.e cf al fig no nos vol pp
    inc ltd co corp jan feb mar apr jun jul aug sep sept oct nov dec gen col
    lt sgt capt rev hon est approx dept univ ave blvd""".split()
)

_CLOSERS = "\"'”’»)\\]」』）"
_LATIN_TERMINATORS = ".!?…"
_CJK_TERMINATORS = "。！？"
_OPENERS = "(\"'“‘"
# Every rule below looks at one whitespace-separated word (and the first
# character of the next), so splitting is linear in the text's length: no
# look-behind into the text before a word, no pattern that can backtrack
# over a run of punctuation. `_CANDIDATE` finds, in one linear scan, the
# words that hold a terminator (only those can end a sentence): it starts
# only at a word's start, its look-ahead reads at most that word, and it
# captures the first character of the next word (None after the last).
_CANDIDATE = re.compile(r"(?<!\S)(?=\S*[" + re.escape(_LATIN_TERMINATORS + _CJK_TERMINATORS)
                        + r"])(\S+)(?=\s+(\S)|)")
# CJK full-width terminators (also Japanese and Chinese) end a sentence even
# without a space; closing quotes/brackets after them stay with it.
_CJK_END = re.compile("[" + _CJK_TERMINATORS + "]+[" + _CLOSERS + "]*")
_INITIALISM = re.compile(r"(?:[a-z]\.)+[a-z]")  # "U.S." (its last '.' is the terminator)


def _latin_end(word):
    """(text before, terminator run) when `word` ends like a Latin-script
    sentence: a run of '.', '!', '?', '…', then only closing quotes or
    brackets ("Stop.\"" -> ("Stop", ".")); None otherwise."""
    body = word.rstrip(_CLOSERS)
    before = body.rstrip(_LATIN_TERMINATORS)
    if len(before) == len(body):
        return None
    return before, body[len(before):]


def _latin_boundary(before, terminators, next_char):
    """Whether a word ending in `terminators` (after the text `before`),
    followed by whitespace and a word starting with `next_char`, ends a
    sentence."""
    if terminators[0] != ".":  # '!', '?', '…' always end one.
        return True
    bare = before.strip(_CLOSERS + _OPENERS).lower()
    if bare in ABBREVIATIONS or bare.rstrip(".") in ABBREVIATIONS:
        return False
    if len(bare) == 1 and bare.isalpha():  # An initial: "J. Smith".
        return False
    if _INITIALISM.fullmatch(bare):  # "U.S." style.
        return False
    if next_char.islower() and next_char.isascii():  # "e.g. this" - not a new sentence.
        return False
    return True


def _word_cuts(word, next_char):
    """Offsets in `word` after which a sentence ends: after each CJK
    terminator run (and its closers), and at the word's end when it ends a
    Latin sentence before a word starting with `next_char` (None: the word
    is the text's last, nothing is cut there). Ascending, no duplicates."""
    cuts = [m.end() for m in _CJK_END.finditer(word)]
    if next_char is None:
        return [c for c in cuts if c < len(word)]
    ending = _latin_end(word)
    if ending is not None and _latin_boundary(*ending, next_char) and (
            not cuts or cuts[-1] != len(word)):
        cuts.append(len(word))
    return cuts


def split_sentences(text):
    """Splits a paragraph into sentences, in time linear in its length.

    Ends on '.', '!', '?', '…' followed by whitespace (Latin scripts and
    Korean, whose sentences end with e.g. '다.' or '요?'), and on the CJK
    '。', '！', '？' with or without a space. Does not split after common
    abbreviations, initials, before a lowercase continuation, or inside
    decimals (no whitespace: 3.14). Closing quotes/brackets stay with the
    sentence they close."""
    text = text.strip()
    sentences, start = [], 0
    for word in _CANDIDATE.finditer(text):
        for cut in _word_cuts(word.group(1), word.group(2)):
            piece = text[start:word.start() + cut].strip()
            if piece:
                sentences.append(piece)
            start = word.start() + cut
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def _open_text(path):
    """The lines of a UTF-8 input file, for a `with` block; UsageError
    naming the file and byte offset at the first byte that is not UTF-8."""
    if not os.path.isfile(path):
        raise UsageError(f"Input file not found: {path}")
    return contextlib.closing(read_lines(path))


def detect_format(path, sample_lines=1000):
    """`detect_lines_format` of a local file's first lines."""
    with _open_text(path) as f:
        return detect_lines_format(f, sample_lines)


def detect_lines_format(lines, sample_lines=1000):
    """'paragraphs' when many of the first lines hold several sentences, or
    many continue a sentence on the next line (hard-wrapped text: the line
    ends without sentence-final punctuation and the next starts in lower
    case), else 'sentences' (the original one-sentence-per-line format).
    Reads at most `sample_lines` non-blank lines of the iterable."""
    count = multi = wrapped = 0
    prev = ""
    for line in lines:
        line = line.strip()
        if prev and line and line[0].islower() and not _ends_sentence(prev):
            wrapped += 1
        prev = line
        if not line:
            continue
        count += 1
        multi += len(split_sentences(line)) > 1
        if count >= sample_lines:
            break
    return "paragraphs" if count and (multi + wrapped) / count > 0.2 else "sentences"


def iter_sentence_file(path):
    """Original format of a local file (`sentence_documents`)."""
    with _open_text(path) as f:
        yield from sentence_documents(f)


def sentence_documents(lines):
    """Original format: one sentence per line, blank line between docs."""
    doc = []
    for line in lines:
        line = line.strip()
        if line:
            doc.append(line)
        elif doc:
            yield doc
            doc = []
    if doc:
        yield doc


# Scripts written without spaces between words: a line break between two of
# their characters joins without a space. Hangul is NOT among them (Korean
# separates words with spaces, so a wrapped Korean line joins with one).
_NO_SPACE_RANGES = (
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3000, 0x303F),  # CJK symbols and punctuation (。、「」)
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF00, 0xFF60),  # Fullwidth forms (！？（）)
    (0xFF61, 0xFF9F),  # Halfwidth katakana
    (0x20000, 0x3134F),  # CJK extensions B-G
)
# A paragraph longer than this many lines is cut (bounded memory).
MAX_PARAGRAPH_LINES = 1000


def _no_space_char(ch):
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in _NO_SPACE_RANGES)


def join_wrapped_lines(lines):
    """Joins the (stripped) lines of one hard-wrapped paragraph.

    With a space, except between two characters of a script written without
    spaces (Chinese, Japanese): "今天天气" + "很好。" -> "今天天气很好。"."""
    parts = []
    for line in lines:
        if parts and not (_no_space_char(parts[-1][-1]) and _no_space_char(line[0])):
            parts.append(" ")
        parts.append(line)
    return "".join(parts)


def _ends_sentence(line):
    """Whether a (stripped) line ends with a sentence terminator, maybe
    followed by closing quotes or brackets."""
    body = line.rstrip(_CLOSERS)
    return bool(body) and body[-1] in _LATIN_TERMINATORS + _CJK_TERMINATORS


def _paragraph_documents(block):
    """Documents (sentence lists) of one blank-line-separated block."""
    if len(block) > 1 and all(_ends_sentence(line) for line in block[:-1]):
        paragraphs = block  # One unwrapped paragraph per line.
    else:
        paragraphs = [join_wrapped_lines(block)]
    for paragraph in paragraphs:
        sentences = split_sentences(paragraph)
        if sentences:
            yield sentences


def iter_paragraph_file(path):
    """Plain paragraphs of a local file (`paragraph_documents`)."""
    with _open_text(path) as f:
        yield from paragraph_documents(f)


def paragraph_documents(lines):
    """Plain paragraphs, separated by blank lines, possibly hard-wrapped:
    one document per paragraph (see the module docstring)."""
    block = []
    for line in lines:
        line = line.strip()
        if line:
            block.append(line)
            if len(block) < MAX_PARAGRAPH_LINES:
                continue
        yield from _paragraph_documents(block)
        block = []
    yield from _paragraph_documents(block)


def file_documents(path, input_format="auto", open_lines=None):
    """Documents of one text file, in the file's order.

    open_lines: path -> a context manager over the file's text lines (the
    Beam driver opens through Beam's file systems: GCS, S3, HDFS); local
    files by default. With input_format "auto" the file is opened twice:
    once to sample its format, once to read it."""
    open_lines = open_lines or _open_text
    fmt = input_format
    if fmt == "auto":
        with open_lines(path) as f:
            fmt = detect_lines_format(f)
    parse = paragraph_documents if fmt == "paragraphs" else sentence_documents
    with open_lines(path) as f:
        yield from parse(f)


def parse_tfds_spec(spec):
    """'tfds:NAME[:SPLIT]' -> (name, split); split defaults to 'train'.

    NAME may contain a config and version: wikipedia/20230601.en."""
    body = spec[len("tfds:"):]
    name, _, split = body.partition(":")
    if not name:
        raise UsageError(f"Empty TFDS dataset name in {spec!r}; use tfds:NAME[:SPLIT].")
    return name, split or "train"


def _load_tfds(spec, split=None):
    """(tf.data.Dataset, builder info) of a tfds: input, its split or `split`."""
    import tensorflow_datasets as tfds

    name, default_split = parse_tfds_spec(spec)
    split = split or default_split
    try:
        return tfds.load(name, split=split, shuffle_files=False, with_info=True)
    except Exception as err:  # DatasetNotFoundError, bad split, ...
        if type(err).__name__ == "DatasetNotFoundError" or "not found" in str(err).lower():
            raise UsageError(f"Unknown TFDS dataset {name!r} (from {spec!r}).") from None
        raise UsageError(f"Cannot load TFDS dataset {name!r} split {split!r}: {err}") from None


def tfds_num_examples(spec):
    """Examples in a tfds: input's split, from the dataset's info (or the
    dataset's known cardinality); None when the split is already a slice
    ("train[:10%]") or its size is unknown: it is then read as one piece."""
    name, split = parse_tfds_spec(spec)
    if "[" in split:
        return None
    dataset, info = _load_tfds(spec)
    if split in info.splits and info.splits[split].num_examples:
        return info.splits[split].num_examples
    count = int(dataset.cardinality())
    return count if count >= 0 else None


def tfds_examples(spec, text_field, start=None, stop=None):
    """The document of each example of a TFDS text dataset, in order: its
    `text_field` split into paragraphs at newlines, then into sentences;
    [] for an example without text (kept, so callers can count examples).
    start/stop read the examples [start, stop) of the split only."""
    name, split = parse_tfds_spec(spec)
    if not text_field:
        raise UsageError(f"{spec} needs --text-field (e.g. --text-field text).")
    if start is not None:
        split = f"{split}[{start}:{stop}]"
    dataset, _ = _load_tfds(spec, split)
    import tensorflow_datasets as tfds

    for example in tfds.as_numpy(dataset):
        if text_field not in example:
            raise UsageError(
                f"TFDS dataset {name!r} has no field {text_field!r}; "
                f"fields: {sorted(example)}."
            )
        text = example[text_field]
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        doc = []
        for paragraph in str(text).split("\n"):
            doc.extend(split_sentences(paragraph))
        yield doc


def iter_tfds(spec, text_field):
    """Each example of a TFDS text dataset with text is a document."""
    return (doc for doc in tfds_examples(spec, text_field) if doc)


def is_glob(spec):
    return any(c in spec for c in "*?[")


def expand_inputs(inputs):
    """Local glob patterns among the inputs -> their files, sorted; other
    inputs unchanged. A pattern that matches nothing is refused."""
    out = []
    for spec in inputs:
        if spec.startswith("tfds:") or not is_glob(spec) or os.path.exists(spec):
            out.append(spec)
            continue
        found = sorted(p for p in glob.glob(spec) if os.path.isfile(p))
        if not found:
            raise UsageError(f"--input {spec}: no file matches the pattern.")
        out.extend(found)
    return out


def check_inputs(inputs, text_field=None):
    """Fails early, naming the input, on a missing file or TFDS field."""
    if not inputs:
        raise UsageError("No --input given.")
    for spec in inputs:
        if spec.startswith("tfds:"):
            parse_tfds_spec(spec)
            if not text_field:
                raise UsageError(f"{spec} needs --text-field (e.g. --text-field text).")
        elif not os.path.isfile(spec):
            raise UsageError(f"Input file not found: {spec}")


def check_text_files(inputs):
    """Refuses text-file inputs that are not UTF-8 (naming the file and the
    byte offset of the first undecodable byte) or that hold no text at all,
    before anything is written: one linear pass over each file. Whether a
    tfds: input has documents is only known when it is read."""
    files = [spec for spec in inputs if not spec.startswith("tfds:")]
    if files:
        check_utf8_text(files, require_text=len(files) == len(inputs), nothing="no documents")


def input_documents(spec, text_field=None, input_format="auto"):
    """The documents of one input (a text file or tfds: spec), in order."""
    if spec.startswith("tfds:"):
        return iter_tfds(spec, text_field)
    return file_documents(spec, input_format)


def iter_documents(inputs, text_field=None, input_format="auto"):
    """Yields documents (lists of sentence strings) from every input in order."""
    if input_format not in FORMATS:
        raise UsageError(f"Unknown input format {input_format!r}; expected one of {FORMATS}.")
    check_inputs(inputs, text_field)
    for spec in inputs:
        yield from input_documents(spec, text_field, input_format)
