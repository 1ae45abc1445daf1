"""A built-in fine-tuning task with real text and real labels, made offline:
which area of the Python standard library a documentation sentence comes
from.

Sentences are the prose of the standard library's docstrings (the default
corpus, kerasbert.data.default_corpus); the label is the area of the module
the sentence documents, from `TOPICS` (the one place that maps modules to
areas). The task is learnable from the words (a sentence about "sockets" or
"headers" is networking, one about "threads" or "futures" concurrency) but
not trivially: many sentences are generic ("Return the result.").

`write_default_task(directory)` writes `train.csv` and `validation.csv`
(columns `sentence,label`; about 1 in 5 sentences, chosen by a hash of the
text, goes to validation), deterministic for a given Python version.
"""

import csv
import hashlib
import io
import os
import sysconfig

from kerasbert.data import default_corpus
from kerasbert.data.text_input import split_sentences
from kerasbert.io_utils import atomic_write_text

# Top-level standard-library modules/packages of each area.
TOPICS = {
    "concurrency": ("asyncio", "concurrent", "multiprocessing", "queue", "sched",
                    "selectors", "subprocess", "threading", "_threading_local"),
    "data formats": ("configparser", "csv", "json", "pickle", "pickletools", "plistlib",
                     "shelve", "sqlite3", "tomllib", "xml", "dbm", "copyreg"),
    "files": ("filecmp", "fileinput", "glob", "gzip", "bz2", "lzma", "ntpath", "os",
              "pathlib", "posixpath", "shutil", "tarfile", "tempfile", "zipfile", "zipimport"),
    "networking": ("email", "ftplib", "http", "imaplib", "ipaddress", "mailbox", "poplib",
                   "smtplib", "socket", "socketserver", "ssl", "urllib", "xmlrpc"),
    "text": ("codecs", "difflib", "gettext", "locale", "re", "string", "stringprep",
             "textwrap", "unicodedata", "encodings", "html", "shlex"),
}
LABELS = tuple(sorted(TOPICS))
VALIDATION_SHARE = 5  # 1 in 5 sentences


def topic_of(path, root=None):
    """The area of a standard-library file, or None."""
    root = root or sysconfig.get_paths()["stdlib"]
    top = os.path.relpath(path, root).split(os.sep)[0]
    top = top[:-3] if top.endswith(".py") else top
    for label, modules in TOPICS.items():
        if top in modules:
            return label
    return None


def labelled_sentences(max_per_label=None):
    """[(sentence, label)] in standard-library file order, de-duplicated."""
    seen, rows, counts = set(), [], dict.fromkeys(LABELS, 0)
    for path in default_corpus.stdlib_files():
        label = topic_of(path)
        if label is None or (max_per_label and counts[label] >= max_per_label):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                source = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        for sentence in default_corpus.docstring_sentences(source, split_sentences):
            sentence = " ".join(sentence.split())
            if len(sentence.split()) < 4 or sentence in seen:
                continue
            if max_per_label and counts[label] >= max_per_label:
                break
            seen.add(sentence)
            rows.append((sentence, label))
            counts[label] += 1
    return rows


def _is_validation(sentence):
    digest = hashlib.sha256(sentence.encode("utf-8")).digest()
    return digest[0] % VALIDATION_SHARE == 0


def _csv_text(rows):
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["sentence", "label"])
    writer.writerows(rows)
    return buffer.getvalue()


def write_default_task(directory, max_per_label=None):
    """Writes DIR/train.csv and DIR/validation.csv (atomically); returns
    {"train": path, "validation": path, "counts": {split: {label: n}}}."""
    rows = labelled_sentences(max_per_label)
    if not rows:
        raise RuntimeError("No standard-library docstrings found for the default task.")
    splits = {"train": [], "validation": []}
    for row in rows:
        splits["validation" if _is_validation(row[0]) else "train"].append(row)
    result = {"counts": {}}
    for split, split_rows in splits.items():
        path = os.path.join(directory, f"{split}.csv")
        atomic_write_text(path, _csv_text(split_rows))
        result[split] = path
        result["counts"][split] = {label: sum(1 for _, l in split_rows if l == label)
                                   for label in LABELS}
    return result
