"""A built-in English corpus made offline from the Python standard library.

Every Python installation carries its standard library's source, and with
it over a megabyte of documentation strings written as English prose, plus
the language-reference topics behind `help()` (pydoc_data/topics.py).
`write_default_corpus` turns them into a pretraining corpus in the original
format (one sentence per line, a blank line between documents, one document
per module) without the network and without executing anything: modules are
parsed with `ast` and only their docstrings are read.

Only prose is kept: paragraphs that are code examples (`>>>` sessions,
indented blocks, ``::`` literal blocks), parameter tables and other
symbol-heavy text are dropped. The walk is in sorted path order, so the
corpus is byte-identical for a given Python version.

The docstring walker and prose filter are shared with bench/data_bench.py,
which builds a larger corpus the same way from site-packages.
"""

import ast
import os
import re
import sys
import sysconfig

from kerasbert.data import text_input
from kerasbert.io_utils import atomic_write_text
from kerasbert.io_utils import cache_dir as io_cache_dir

# Bump when the recipe changes: cached corpora are keyed by it.
CORPUS_VERSION = 1
MB = 2**20

MIN_PARAGRAPH_CHARS = 20
# Share of letters and spaces a paragraph needs to count as prose.
MIN_PROSE_FRACTION = 0.8
MIN_DOCUMENT_SENTENCES = 2

# Standard-library packages whose docstrings are not prose for everyone:
# test suites, the IDLE and Tk GUIs, bundled installers, the 2to3 fixers,
# the demo scripts, third-party/installer folders; `this` is rot13 and
# pydoc_data is read separately (pydoc_topic_documents).
EXCLUDED_PACKAGES = frozenset({
    "test", "tests", "idle_test", "idlelib", "tkinter", "turtledemo",
    "ensurepip", "lib2to3", "site-packages", "dist-packages", "__pycache__",
    "pydoc_data", "this",
})

_CODE_STARTS = (">>>", "...", "$ ", "```", "..", "%", "#")
_SPACE = re.compile(r"\s+")
_BULLET = re.compile(r"(\d{1,2}\.|[-*\u2022])\s+(?=\S)")
# A kept sentence has at least two words with letters ("2." or "Eg:" alone
# are list numbers and labels, not sentences).
_WORD = re.compile(r"[^\W\d_]{2,}")


# Definition-list labels: "name: ", "name (type): ", "name -- "; numpy's
# "name : type" line.
_LABEL = re.compile(
    r"^\**[\w.]+(?:(?:\s*\([^()]{0,60}\))?\s*(?::|--|-)\s+|\s{2,})")
_ENDS_SENTENCE = re.compile(r"[.!?][\"')\]]*$")
_NUMPY_LABEL = re.compile(r"^\**[\w.]+(?:\s*,\s*\**[\w.]+)*\s+:(?:\s|$)")
_CODE_CHARS = re.compile(r"[=;{}<>]|\w\(|\(\)|\[\]|->|::")


def is_sentence(text):
    return len(_WORD.findall(text)) >= 2


def _unbullet(lines):
    """A list item ("1. text" / "- text" / "* text" with its continuation
    lines indented under the text) as plain lines; other paragraphs as
    they are."""
    match = _BULLET.match(lines[0]) if lines else None
    if match is None:
        return lines
    rest = lines[1:]
    if not all(line[:1].isspace() for line in rest):
        return lines
    return [lines[0][match.end():]] + [line.strip() for line in rest]


def _is_prose(paragraph_lines):
    """True when a docstring paragraph (its lines, as cleaned by
    `ast.get_docstring`) reads as running text."""
    if not paragraph_lines:
        return False
    for line in paragraph_lines:
        # Indented lines are code examples, literal blocks or the
        # descriptions of a parameter list (numpy/Google style).
        if line[:1].isspace() or line.lstrip().startswith(_CODE_STARTS):
            return False
    text = " ".join(line.strip() for line in paragraph_lines)
    if len(text) < MIN_PARAGRAPH_CHARS or text.endswith("::"):
        return False
    prose = sum(c.isalpha() or c == " " for c in text)
    return prose >= MIN_PROSE_FRACTION * len(text)


def _described_items(lines):
    """The descriptions of a definition list ("Args:" then "name: text" or
    numpy's "name : type" with the text indented below) as paragraphs.
    Kept: descriptions of 4+ words ending like a sentence. Anything that
    looks like code is dropped: a `>>>` line, "=", ";", braces, calls,
    arrows."""
    if any(line.lstrip().startswith(_CODE_STARTS) for line in lines):
        return []
    if len(lines) > 1 and not lines[0][:1].isspace() and lines[0].endswith(":"):
        lines = lines[1:]  # a section header such as "Args:" or "Returns:"
    indents = [len(line) - len(line.lstrip()) for line in lines]
    base = min(indents)
    items = []
    for line, indent in zip(lines, indents):
        if indent == base or not items:
            items.append([line.strip()])
        else:
            items[-1].append(line.strip())
    out = []
    for item in items:
        if len(item) > 1 and _NUMPY_LABEL.match(item[0]):
            item = item[1:]  # "name : type" on its own line
        text = _LABEL.sub("", " ".join(item), count=1)
        if (len(text.split()) >= 4 and text[:1].isupper()
                and _ENDS_SENTENCE.search(text)
                and not _CODE_CHARS.search(text) and _is_prose([text])):
            out.append(text)
    return out


def prose_paragraphs(docstring):
    """The prose paragraphs of a docstring, each joined into one line;
    definition lists give their descriptions (_described_items)."""
    out = []
    for para in re.split(r"\n[ \t]*\n", docstring.strip("\n")):
        lines = _unbullet([line.rstrip() for line in para.split("\n") if line.strip()])
        if _is_prose(lines):
            out.append(_SPACE.sub(" ", " ".join(lines)).strip())
        elif lines and any(line[:1].isspace() for line in lines):
            out.extend(_SPACE.sub(" ", t).strip() for t in _described_items(lines))
    return out


_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def _documented_nodes(node):
    """Module, classes and functions in source order, found through the
    statement bodies only (expressions cannot hold docstrings; walking them
    would be most of the time)."""
    if isinstance(node, _DOCUMENTED):
        yield node
    for field in _BODIES:
        for child in getattr(node, field, None) or ():
            if isinstance(child, ast.AST):
                yield from _documented_nodes(child)


def docstring_sentences(source, split_sentences=None):
    """Sentences of the prose paragraphs in the docstrings of one module's
    source (module, classes, functions, in source order). Nothing is
    executed; unparsable source gives []."""
    if split_sentences is None:
        split_sentences = text_input.split_sentences
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out = []
    for node in _documented_nodes(tree):
        doc = ast.get_docstring(node)
        if not doc:
            continue
        for paragraph in prose_paragraphs(doc):
            out.extend(s for s in split_sentences(paragraph) if is_sentence(s))
    return out


def python_files(root, exclude=()):
    """`.py` files under `root` in sorted path order, skipping folders (and
    modules) named in `exclude` and hidden folders."""
    exclude = frozenset(exclude)
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in exclude and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py") and name[:-3] not in exclude:
                yield os.path.join(folder, name)


def iter_docstring_documents(paths, min_sentences=MIN_DOCUMENT_SENTENCES):
    """Documents (lists of sentences), one per module file in `paths` that
    yields at least `min_sentences` sentences of prose."""
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                source = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        sentences = docstring_sentences(source, text_input.split_sentences)
        if len(sentences) >= min_sentences:
            yield sentences


def stdlib_files():
    """The standard library's pure-Python modules, sorted: top-level names
    in `sys.stdlib_module_names` (private ones included), without test
    suites, GUIs, installers and the other EXCLUDED_PACKAGES."""
    root = sysconfig.get_paths()["stdlib"]
    names = set(sys.stdlib_module_names)
    for path in python_files(root, EXCLUDED_PACKAGES):
        top = os.path.relpath(path, root).split(os.sep)[0]
        if top.endswith(".py"):
            top = top[:-3]
        if top in names:
            yield path


def pydoc_topic_documents(min_sentences=MIN_DOCUMENT_SENTENCES):
    """Documents from `pydoc_data/topics.py` (the language-reference text
    behind `help("if")` etc.), one per topic in sorted topic order, read
    with `ast.literal_eval` (nothing executed). [] when the file is absent."""
    path = os.path.join(sysconfig.get_paths()["stdlib"], "pydoc_data", "topics.py")
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return []
    topics = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "topics"):
            try:
                topics = ast.literal_eval(node.value)
            except ValueError:
                return []
    documents = []
    for key in sorted(k for k in topics if isinstance(topics[k], str)):
        sentences = [
            s for paragraph in prose_paragraphs(topics[key])
            for s in text_input.split_sentences(paragraph) if is_sentence(s)
        ]
        if len(sentences) >= min_sentences:
            documents.append(sentences)
    return documents


def default_documents():
    """The default corpus's documents: the docstrings of every standard
    library module (stdlib_files order), then the pydoc topics."""
    yield from iter_docstring_documents(stdlib_files())
    yield from pydoc_topic_documents()


def corpus_text(max_mb=None):
    """(text, stats) of the default corpus; `max_mb` stops after the
    document that reaches that many megabytes."""
    limit = None if max_mb is None else int(float(max_mb) * MB)
    parts, documents, sentences, size = [], 0, 0, 0
    for doc in default_documents():
        lines = [_SPACE.sub(" ", s).strip() for s in doc]
        block = "\n".join(line for line in lines if line) + "\n\n"
        parts.append(block)
        documents += 1
        sentences += len(lines)
        size += len(block.encode("utf-8"))
        if limit is not None and size >= limit:
            break
    stats = {
        "documents": documents,
        "sentences": sentences,
        "bytes": size,
        "python_version": "%d.%d.%d" % sys.version_info[:3],
        "corpus_version": CORPUS_VERSION,
    }
    return "".join(parts), stats


def write_default_corpus(path, max_mb=None):
    """Writes the standard-library docstring corpus to `path` (original
    format: one sentence per line, a blank line after each document),
    atomically. Deterministic for a given Python version.

    Returns:
        dict: documents, sentences, bytes (and python_version,
        corpus_version).
    """
    text, stats = corpus_text(max_mb)
    if not stats["documents"]:
        raise RuntimeError(
            "No docstrings found under the standard library at "
            f"{sysconfig.get_paths()['stdlib']!r}: is this Python stripped "
            "of its sources?"
        )
    atomic_write_text(os.fspath(path), text)
    return stats


def default_corpus_path(cache_dir=None):
    """Path of the default corpus, written on first use under `cache_dir`
    (default: `kerasbert.io_utils.cache_dir()`). The name carries the Python and
    recipe versions, so a different Python gets its own file."""
    cache_dir = cache_dir or io_cache_dir()
    major, minor, micro = sys.version_info[:3]
    name = f"stdlib-docstrings-py{major}.{minor}.{micro}-v{CORPUS_VERSION}.txt"
    path = os.path.join(cache_dir, name)
    if not os.path.isfile(path):
        write_default_corpus(path)
    return path
