"""Learns a BERT WordPiece vocabulary from text files.

Words are counted after BERT's normalization (`tokenizer.bert_normalize`:
lower case + accent stripping when `lower_case`) and basic tokenization
(tensorflow-text's `BasicTokenizer`: whitespace and punctuation split, every
CJK ideograph its own word), then
tensorflow-text's WordPiece learner (the one behind `bert_vocab_from_dataset`
and keras-hub's `compute_word_piece_vocabulary`) picks the sub-words.

Every character of the corpus is kept (the learner's `max_unique_chars` is
raised to the alphabet size), so each CJK ideograph seen becomes a
single-character token and no word of the corpus maps to `[UNK]`.
"""

import collections
import os

from kerasbert.text.vocabulary import SPECIAL_TOKENS

_JOINER = "##"
_BATCH_LINES = 2048
# Words longer than this are dropped from the counts (the learner's default);
# such rare long words are split into pieces of shorter ones, or [UNK] past
# the tokenizer's max_chars_per_word (100 characters).
_MAX_TOKEN_LENGTH = 50


def _check_inputs(files):
    files = [os.fspath(f) for f in ([files] if isinstance(files, (str, os.PathLike)) else files)]
    if not files:
        raise ValueError("No input files given.")
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        raise FileNotFoundError(f"Input file(s) not found: {', '.join(missing)}")
    return files


def _iter_line_batches(files, progress):
    """Yields lists of lines; advances `progress` by the bytes consumed."""
    for path in files:
        with open(path, "rb") as f:
            batch = []
            for raw in f:
                progress.update(len(raw))
                line = raw.decode("utf-8", errors="replace").strip()
                if line:
                    batch.append(line)
                if len(batch) == _BATCH_LINES:
                    yield batch
                    batch = []
            if batch:
                yield batch


def count_words(files, lower_case=True, show_progress=None):
    """Counts BERT-pretokenized words in text files.

    Args:
        files: a path or a list of paths of UTF-8 text files.
        lower_case: lower case and strip accents first (BERT uncased).
        show_progress: tqdm bar over input bytes; `None` shows it only for
            inputs over 8 MB.

    Returns:
        A `collections.Counter` mapping word (str) -> count.
    """
    import tensorflow as tf
    from tensorflow_text.python.ops.bert_tokenizer import BasicTokenizer
    from tqdm import tqdm

    files = _check_inputs(files)
    total = sum(os.path.getsize(f) for f in files)
    if show_progress is None:
        show_progress = total > 8 * 2**20
    from kerasbert.text.tokenizer import bert_normalize  # lazy: tensorflow

    # Same normalization as WordPieceTokenizer; the split itself is
    # BasicTokenizer's (whitespace, punctuation, one word per CJK ideograph).
    basic = BasicTokenizer(lower_case=False)

    def split(lines):
        # [B] -> flat [words]: word boundaries are all the learner needs.
        return basic.tokenize(bert_normalize(lines, lower_case)).flat_values

    counts = collections.Counter()
    with tqdm(
        total=total, unit="B", unit_scale=True, desc="counting words",
        disable=not show_progress,
    ) as progress:
        # Python reads line batches; tf.data splits them on every core.
        words = (
            tf.data.Dataset.from_generator(
                lambda: _iter_line_batches(files, progress),
                output_signature=tf.TensorSpec([None], tf.string),
            )
            .map(split, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
            .prefetch(tf.data.AUTOTUNE)
        )
        for batch in words.as_numpy_iterator():
            counts.update(batch.tolist())
    return collections.Counter({w.decode("utf-8"): c for w, c in counts.items()})


# The learner's vocabulary size is a step function of its count threshold,
# with big steps at the small thresholds big vocabularies need (30,522 asked
# on the 20 MB bench corpus: one threshold gave 28,184, the next one down
# too many). So the search also keeps the smallest too-big vocabulary it
# sees and, unless a fitting one is within _UNDERSHOOT of the size, cuts
# that one down to exactly vocab_size (see _truncate).
_UNDERSHOOT = 0.005
_OVERSHOOT = 0.15


def _search_threshold(learner, words, vocab_size, params, forced):
    """A vocabulary of at most `vocab_size` tokens, as close to it as the
    corpus allows.

    tensorflow-text's own search bisects the threshold linearly between 10
    and the top count, one full learning pass (seconds) per step, and never
    tries thresholds under 10 (small corpora lose every rare word). We bisect
    in log space between 1 and the top count (about log2(log2(max count))
    passes) and stop at the first vocabulary within _UNDERSHOOT below the
    size, or within _OVERSHOOT above it (then truncated).
    """
    # lo: largest threshold known to give too many tokens (0: none yet);
    # hi: smallest known to fit (the top count + 1 keeps only characters).
    lo, hi = 0, max(c for _, c in words) + 1
    fits = over = None
    while hi - lo > 1:
        mid = min(max(int(round((max(lo, 1) * hi) ** 0.5)), lo + 1), hi - 1)
        vocab = learner.learn_with_thresh(words, mid, params)
        if len(vocab) > vocab_size:
            lo, over = mid, vocab
            if len(vocab) <= vocab_size * (1 + _OVERSHOOT):
                break
        else:
            hi, fits = mid, vocab
            if len(vocab) >= vocab_size * (1 - _UNDERSHOOT):
                break
    if fits is not None and (over is None or len(fits) >= vocab_size * (1 - _UNDERSHOOT)):
        return fits
    if over is None:  # Even the top threshold was never tried: only characters.
        return learner.learn_with_thresh(words, hi, params)
    return _truncate(over, vocab_size, forced)


def _truncate(vocab, vocab_size, forced):
    """The first `vocab_size` tokens of a too-big learned vocabulary that
    still holds every token in `forced` (specials, each character and its
    "##" form, which the learner lists with count 1, i.e. last).

    The learner orders the rest by count (most frequent first), so this
    keeps the most frequent pieces. Any vocabulary holding all characters
    and their "##" forms tokenizes every word (greedy longest match), so
    dropping the rarest pieces is safe.
    """
    budget = vocab_size - sum(1 for t in vocab if t in forced)
    kept = set()
    for token in vocab:
        if token not in forced:
            if budget <= 0:
                break
            kept.add(token)
            budget -= 1
    return [t for t in vocab if t in forced or t in kept]


def learn_vocab(word_counts, vocab_size, special_tokens=SPECIAL_TOKENS):
    """WordPiece vocabulary from word counts (tensorflow-text's learner).

    Returns:
        A list of at most `vocab_size` tokens, `special_tokens` first.

    Raises:
        ValueError: no words, or `vocab_size` cannot hold the special tokens
            plus every character and its `##` suffix form.
    """
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    if not word_counts:
        raise ValueError("The corpus has no words: nothing to build a vocabulary from.")
    alphabet = {c for word in word_counts for c in word}
    # The learner always adds each character and its "##" form.
    needed = len(special_tokens) + 2 * len(alphabet)
    if vocab_size < needed:
        raise ValueError(
            f"vocab_size={vocab_size} is too small: the {len(special_tokens)} "
            f"special tokens plus {len(alphabet)} characters (each alone and as "
            f"'##' suffix) need at least {needed}."
        )
    params = learner.Params(
        upper_thresh=None, lower_thresh=None, num_iterations=4,
        max_input_tokens=-1, max_token_length=_MAX_TOKEN_LENGTH,
        max_unique_chars=len(alphabet), vocab_size=vocab_size,
        slack_ratio=0.05, include_joiner_token=True, joiner=_JOINER,
        reserved_tokens=list(special_tokens),
    )
    # The learner ignores longer words, and with them their characters; count
    # those characters as one-letter words so the alphabet stays complete.
    kept = collections.Counter()
    for word, count in word_counts.items():
        if len(word) <= _MAX_TOKEN_LENGTH:
            kept[word] += count
        else:
            for char in word:
                kept[char] += count
    # A fixed order (count, then word): the token order never depends on the
    # order the (parallel) counting saw the words.
    words = sorted(kept.items(), key=lambda item: (-item[1], item[0]))
    forced = set(special_tokens) | alphabet | {_JOINER + c for c in alphabet}
    vocab = _search_threshold(learner, words, vocab_size, params, forced)
    vocab = list(special_tokens) + [t for t in vocab if t not in special_tokens]
    if len(vocab) > vocab_size:
        # The learner's threshold search bottomed out above the target.
        raise ValueError(
            f"vocab_size={vocab_size} is too small for this corpus: the smallest "
            f"vocabulary the learner found has {len(vocab)} tokens."
        )
    return vocab


def build_wordpiece_vocab(files, vocab_size, lower_case=True, show_progress=None,
                          special_tokens=SPECIAL_TOKENS):
    """Builds a BERT WordPiece vocabulary from UTF-8 text files.

    Args:
        files: a path or list of paths; any line layout (one sentence per
            line, paragraphs); blank lines are skipped.
        vocab_size: the number of tokens wanted: never more; fewer only when
            the corpus has too few distinct pieces or a learned size lands
            within 0.5% below it.
        lower_case: build an uncased vocabulary (lower case, accents stripped).
        show_progress: tqdm bar over input bytes (`None`: only for big inputs).
        special_tokens: tokens placed first, in order (ids 0..4 by default).

    Returns:
        A list of tokens: `[PAD] [UNK] [CLS] [SEP] [MASK]`, then the learned
        pieces (suffix pieces start with `##`).
    """
    counts = count_words(files, lower_case=lower_case, show_progress=show_progress)
    if not counts:
        raise ValueError(f"The corpus is empty (no words in {', '.join(map(str, _check_inputs(files)))}).")
    return learn_vocab(counts, vocab_size, special_tokens=special_tokens)
