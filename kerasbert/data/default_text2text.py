"""A built-in text2text task made offline: a sentence of the built-in
corpus -> the same sentence with its words in reverse order.

    source  "Return the number of bytes in the buffer."
    target  "buffer. the in bytes of number the Return"

The sentences are the standard library's documentation prose (the
sentences of the built-in fine-tuning task, `kerasbert.data.default_task`);
words are split at white space and reversed, punctuation staying with its
word. The transformation is deterministic and its own inverse (reversing
the target gives the source back), so the right answer is known exactly,
yet a model must learn it: every output token depends on the whole source
and on where it stands in it, which is what an encoder-decoder's attention
is for.

    kerasbert finetune --task builtin/reverse_words --task-type text2text ...

`load_split(spec, split)` builds the examples in memory ("train" or
"validation": about 1 in 5 sentences, chosen by a hash of the text);
`write_default_text2text(directory)` writes them as `train.tsv` and
`validation.tsv` (columns `source`, `target`) for `--task tsv:...`. Both
are deterministic for a given Python version.
"""

import csv
import functools
import hashlib
import io
import os

from kerasbert.data import default_task
from kerasbert.data.finetuning.examples import TaskData
from kerasbert.data.finetuning.examples import TaskDataError
from kerasbert.io_utils import atomic_write_text

REVERSE_WORDS = "builtin/reverse_words"
TASKS = (REVERSE_WORDS,)
SPLITS = ("train", "validation")
VALIDATION_SHARE = 5  # 1 in 5 sentences
# Sentences of 4..MAX_WORDS words: the task's targets fit 64 pieces.
MAX_WORDS = 16


def reverse_words(text):
    """The words of `text` (split at white space) in reverse order, joined
    by single spaces; `reverse_words(reverse_words(t))` is `t` with its
    white space normalised."""
    return " ".join(reversed(text.split()))


def _split_of(sentence):
    digest = hashlib.sha256(sentence.encode("utf-8")).digest()
    return "validation" if digest[0] % VALIDATION_SHARE == 0 else "train"


@functools.lru_cache(maxsize=4)
def _pairs(max_examples):
    pairs = {split: [] for split in SPLITS}
    count = 0
    for sentence, _ in default_task.labelled_sentences():
        if max_examples is not None and count >= max_examples:
            break
        if len(sentence.split()) > MAX_WORDS:
            continue
        pairs[_split_of(sentence)].append((sentence, reverse_words(sentence)))
        count += 1
    return {split: tuple(rows) for split, rows in pairs.items()}


def reverse_words_pairs(max_examples=None):
    """{"train": [(source, target)], "validation": [...]}: the built-in
    corpus's sentences of 4 to `MAX_WORDS` words and their reversals, in
    corpus order, at most `max_examples` in all (None: every one). Made
    once per process (reading the standard library takes seconds)."""
    return {split: list(rows) for split, rows in _pairs(max_examples).items()}


def load_split(spec, split="train", max_examples=None):
    """The `TaskData` (task type text2text) of one split of a built-in task."""
    if spec not in TASKS:
        raise TaskDataError(f"Unknown built-in task {spec!r}; built-in: {', '.join(TASKS)}.")
    split = {"dev": "validation"}.get(split, split)
    if split not in SPLITS:
        raise TaskDataError(f"{spec} has the splits {', '.join(SPLITS)}, not {split!r}.")
    rows = reverse_words_pairs(max_examples)[split]
    if not rows:
        raise TaskDataError(f"{spec}: no standard-library docstrings found to make it from.")
    examples = [{"source": source, "target": target} for source, target in rows]
    return TaskData(examples, "text2text", None, spec, split, True)


def _tsv_text(rows):
    buffer = io.StringIO()
    # As file_sources reads TSV: no quoting (a quote is a character).
    writer = csv.writer(buffer, delimiter="\t", quoting=csv.QUOTE_NONE, quotechar=None,
                        lineterminator="\n")
    writer.writerow(["source", "target"])
    writer.writerows(rows)
    return buffer.getvalue()


def write_default_text2text(directory, max_examples=None):
    """Writes DIR/train.tsv and DIR/validation.tsv (atomically); returns
    {"train": path, "validation": path, "counts": {split: n}}."""
    pairs = reverse_words_pairs(max_examples)
    if not any(pairs.values()):
        raise RuntimeError("No standard-library docstrings found for the built-in text2text task.")
    result = {"counts": {}}
    for split, rows in pairs.items():
        path = os.path.join(directory, f"{split}.tsv")
        atomic_write_text(path, _tsv_text(rows))
        result[split] = path
        result["counts"][split] = len(rows)
    return result
