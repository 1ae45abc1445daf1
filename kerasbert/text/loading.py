"""One place that knows the three tokenizer families: which class a path
means, which packer and segment layout go with it, which files carry it.

    path                                   tokenizer               packing
    *.model                                SentencePieceTokenizer  [CLS] a [SEP] b [SEP]
    DIR with vocab.json + merges.txt,      BytePairTokenizer       <s> a </s></s> b </s>
      or .../vocab.json (merges.txt beside)
    anything else (vocab.txt)              WordPieceTokenizer      [CLS] a [SEP] b [SEP]

A fine-tuning directory stores the files under fixed names
(`SAVED_FILES`) and describes the tokenizer in config.json
(`describe_tokenizer`); `load_saved_tokenizer` reads it back, and a
directory from before the description existed loads as WordPiece from its
"vocab" entry.

Path resolution (`resolve_tokenizer_path`) is plain Python, so CLI option
checks do not import TensorFlow.
"""

import dataclasses
import hashlib
import json
import os
import shutil

from kerasbert.errors import UsageError

WORDPIECE, SENTENCEPIECE, BPE = "wordpiece", "sentencepiece", "bpe"
BPE_VOCABULARY, BPE_MERGES = "vocab.json", "merges.txt"

#: File names a fine-tuning directory keeps each family's files under, in
#: the order the tokenizer class takes them. Fixed names keep user file
#: names from colliding with config.json / model.keras.
SAVED_FILES = {
    WORDPIECE: ("vocab.txt",),
    SENTENCEPIECE: ("sentencepiece.model",),
    BPE: (BPE_VOCABULARY, BPE_MERGES),
}


#: Each family's special tokens, looked up by string in its vocabulary (ids
#: are never assumed): tokenizer attribute -> token.
SPECIAL_TOKENS = {
    WORDPIECE: {"pad_id": "[PAD]", "unk_id": "[UNK]", "cls_id": "[CLS]",
                "sep_id": "[SEP]", "mask_id": "[MASK]"},
    # ALBERT's SentencePiece models (train_sentencepiece adds the same).
    SENTENCEPIECE: {"pad_id": "<pad>", "unk_id": "<unk>", "cls_id": "[CLS]",
                    "sep_id": "[SEP]", "mask_id": "[MASK]"},
    BPE: {"cls_id": "<s>", "pad_id": "<pad>", "sep_id": "</s>", "unk_id": "<unk>",
          "mask_id": "<mask>"},
}
#: How a piece says it begins a word: SentencePiece's "▁" and byte-level
#: BPE's "Ġ" (a leading space) prefix word-initial pieces; WordPiece marks
#: the others ("##" continuations).
WORD_START = {SENTENCEPIECE: "\u2581", BPE: "\u0120"}
SUFFIX_INDICATOR = "##"


def word_starts(kind, tokens):
    """Per token of a vocabulary (id order), whether a piece with that id
    begins a word; the rest continue the word before them (what whole-word
    masking and `SubwordTokenizer.tokenize`'s word groups use)."""
    if kind == WORDPIECE:
        return [not (t.startswith(SUFFIX_INDICATOR) and len(t) > len(SUFFIX_INDICATOR))
                for t in tokens]
    return [t.startswith(WORD_START[kind]) for t in tokens]


_FAMILY_WORDS = {WORDPIECE: "a BERT vocabulary", SENTENCEPIECE: "an ALBERT model",
                 BPE: "a RoBERTa vocabulary"}


def special_ids(kind, tokens, source):
    """{attribute: id} of the family's `SPECIAL_TOKENS` in `tokens` (the
    vocabulary in id order; the first occurrence counts).

    Raises:
        ValueError: naming `source` and every missing token.
    """
    index = {}
    for i, token in enumerate(tokens):
        index.setdefault(token, i)
    wanted = SPECIAL_TOKENS[kind]
    missing = [token for token in wanted.values() if token not in index]
    if missing:
        what = "SentencePiece model" if kind == SENTENCEPIECE else "Vocabulary file"
        raise ValueError(
            f"{what} {source} lacks the special token(s) {', '.join(missing)}; "
            f"{_FAMILY_WORDS[kind]} needs {', '.join(wanted.values())}.")
    return {attr: index[token] for attr, token in wanted.items()}


def read_vocabulary(path):
    """(kind, files, tokens in id order) of a `--vocab` path, in plain
    Python (no TensorFlow: the data writer's main process uses it).

    Raises `UsageError` naming a missing or unreadable file."""
    kind, files = resolve_tokenizer_path(path)
    try:
        if kind == WORDPIECE:
            from kerasbert.text.vocabulary import load_vocab

            tokens = load_vocab(files[0])
        elif kind == SENTENCEPIECE:
            import sentencepiece

            processor = sentencepiece.SentencePieceProcessor()
            if not processor.Load(files[0]):
                raise ValueError("not a SentencePiece model")
            tokens = [processor.IdToPiece(i) for i in range(processor.GetPieceSize())]
        else:
            tokens = load_bpe_vocab(files[0])
    except (OSError, RuntimeError, ValueError, UnicodeDecodeError) as error:
        raise UsageError(f"{files[0]}: {error}") from None
    return kind, files, tokens


def load_bpe_vocab(path):
    """Reads a `vocab.json` ({token: id}, ids 0..V-1) -> tokens in id order."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"BPE vocabulary file not found: {path}")
    with open(path, encoding="utf-8") as f:
        try:
            mapping = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not a JSON vocabulary: {e}") from e
    if not isinstance(mapping, dict) or not mapping:
        raise ValueError(f"{path} must hold a non-empty {{token: id}} object.")
    tokens = [None] * len(mapping)
    for token, index in mapping.items():
        if not isinstance(index, int) or not 0 <= index < len(tokens):
            raise ValueError(
                f"{path}: token {token!r} has id {index!r}; ids must be "
                f"0..{len(tokens) - 1} (each used once)."
            )
        if tokens[index] is not None:
            raise ValueError(
                f"{path}: id {index} is used by {tokens[index]!r} and {token!r}."
            )
        tokens[index] = token
    return tokens


def resolve_tokenizer_path(path):
    """(kind, files) a `--vocab` path stands for; raises `UsageError` naming
    the missing file.

    Args:
        path: a vocab.txt, a SentencePiece `.model`, a directory holding
            vocab.json + merges.txt, or a vocab.json with merges.txt beside.

    Returns:
        (one of "wordpiece", "sentencepiece", "bpe", tuple of file paths in
        the order the tokenizer class takes them).
    """
    if path is None:
        raise UsageError("Give the tokenizer files (--vocab): a vocab.txt, a SentencePiece "
                         ".model, or a directory with vocab.json and merges.txt.")
    path = os.fspath(path)
    if os.path.isdir(path):
        files = (os.path.join(path, BPE_VOCABULARY), os.path.join(path, BPE_MERGES))
        kind = BPE
    elif os.path.basename(path) == BPE_VOCABULARY:
        files = (path, os.path.join(os.path.dirname(path), BPE_MERGES))
        kind = BPE
    else:
        kind = SENTENCEPIECE if path.endswith(".model") else WORDPIECE
        files = (path,)
    for name in files:
        if not os.path.isfile(name):
            what = {WORDPIECE: "Vocabulary file", SENTENCEPIECE: "SentencePiece model",
                    BPE: "BPE vocabulary file"}[kind]
            if kind == BPE and name.endswith(BPE_MERGES):
                what = "BPE merges file"
            raise UsageError(f"{what} not found: {name}")
    return kind, files


def _construct(kind, files, lower_case):
    from kerasbert.text.byte_pair_tokenizer import BytePairTokenizer
    from kerasbert.text.sentencepiece_tokenizer import SentencePieceTokenizer
    from kerasbert.text.tokenizer import WordPieceTokenizer

    try:
        if kind == BPE:
            # Byte-level BPE is cased by construction: lower_case does not apply.
            return BytePairTokenizer(*files)
        cls = SentencePieceTokenizer if kind == SENTENCEPIECE else WordPieceTokenizer
        return cls(files[0], lower_case=True if lower_case is None else lower_case)
    except (ValueError, FileNotFoundError, UnicodeDecodeError) as error:
        raise UsageError(f"{files[0]}: {error}") from None


def load_tokenizer(path, lower_case=None):
    """The tokenizer a path stands for (see `resolve_tokenizer_path`).

    Args:
        path: vocab.txt, `.model`, a BPE directory or its vocab.json.
        lower_case: WordPiece / SentencePiece casing (default True);
            ignored for byte-level BPE, which is always cased.

    Returns:
        a `WordPieceTokenizer`, `SentencePieceTokenizer` or
        `BytePairTokenizer`. Invalid files raise `UsageError` naming them.
    """
    kind, files = resolve_tokenizer_path(path)
    return _construct(kind, files, lower_case)


def tokenizer_kind(tokenizer):
    """"wordpiece", "sentencepiece" or "bpe" for a tokenizer instance."""
    from kerasbert.text.byte_pair_tokenizer import BytePairTokenizer
    from kerasbert.text.sentencepiece_tokenizer import SentencePieceTokenizer
    from kerasbert.text.tokenizer import WordPieceTokenizer

    for kind, cls in ((BPE, BytePairTokenizer), (SENTENCEPIECE, SentencePieceTokenizer),
                      (WORDPIECE, WordPieceTokenizer)):
        if isinstance(tokenizer, cls):
            return kind
    raise TypeError(f"Not a kerasbert tokenizer: {type(tokenizer).__name__}.")


def tokenizer_files(tokenizer):
    """The tokenizer's source file paths, in the order its class takes them
    (vocab.txt; the .model; vocab.json, merges.txt)."""
    kind = tokenizer_kind(tokenizer)
    if kind == BPE:
        return [tokenizer.vocabulary_file, tokenizer.merges_file]
    if kind == SENTENCEPIECE:
        return [tokenizer.model_file]
    return [tokenizer.vocab_file]


def describe_tokenizer(tokenizer):
    """A JSON-able description, as config.json keeps it:
    {"type": kind, "files": names under `SAVED_FILES`, "lower_case": bool}."""
    kind = tokenizer_kind(tokenizer)
    return {"type": kind, "files": list(SAVED_FILES[kind]), "lower_case": bool(tokenizer.lower_case)}


def save_tokenizer_files(tokenizer, directory):
    """Copies the tokenizer's files into `directory` under `SAVED_FILES`
    names; returns `describe_tokenizer(tokenizer)`."""
    description = describe_tokenizer(tokenizer)
    for source, name in zip(tokenizer_files(tokenizer), description["files"]):
        shutil.copyfile(source, os.path.join(directory, name))
    return description


def saved_tokenizer_files(directory, config):
    """Paths of the tokenizer files a fine-tuning directory's config.json
    names (config["tokenizer"], or the older WordPiece-only "vocab")."""
    description = config.get("tokenizer")
    names = description["files"] if description else [config["vocab"]]
    return [os.path.join(directory, name) for name in names]


def load_saved_tokenizer(directory, config):
    """The tokenizer of a fine-tuning directory, from its config.json dict.

    Directories written before config.json had a "tokenizer" entry hold a
    WordPiece vocabulary named by "vocab".
    """
    description = config.get("tokenizer") or {"type": WORDPIECE, "files": [config["vocab"]]}
    files = saved_tokenizer_files(directory, config)
    for path in files:
        if not os.path.isfile(path):
            raise UsageError(f"{directory}: missing {os.path.basename(path)}.")
    if description["type"] not in SAVED_FILES:
        raise UsageError(f"{directory}/config.json: unknown tokenizer type {description['type']!r}.")
    lower_case = description.get("lower_case", config.get("lower_case", True))
    return _construct(description["type"], files, lower_case)


# --- packing ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SegmentLayout:
    """Where the special tokens go in a two-segment input:
    `start a sep×separators b sep`, padded with `pad_id`.

    BERT / ALBERT: `[CLS] a [SEP] b [SEP]`, type id 1 on `b [SEP]`;
    RoBERTa: `<s> a </s></s> b </s>`, type ids all 0.

    Attributes:
        start_id, sep_id, pad_id: special ids.
        separators: separators between the segments (1 BERT, 2 RoBERTa).
        second_type_id: type id of the second segment and its final
            separator (1 BERT, 0 RoBERTa).
    """

    start_id: int
    sep_id: int
    pad_id: int
    separators: int
    second_type_id: int

    def second_offset(self, first_length):
        """Position of the second segment's first piece."""
        return 1 + first_length + self.separators

    def special_tokens(self, pair=True):
        """Special tokens a packed input spends: 2 single, 2 + separators pair."""
        return 2 + self.separators if pair else 2

    def first_part(self, first):
        """`start first sep×separators`: the ids before the second segment
        (a Python list)."""
        return [self.start_id] + list(first) + [self.sep_id] * self.separators


def segment_layout(tokenizer):
    """The `SegmentLayout` the tokenizer's family packs with."""
    roberta = tokenizer_kind(tokenizer) == BPE
    return SegmentLayout(int(tokenizer.cls_id), int(tokenizer.sep_id), int(tokenizer.pad_id),
                         separators=2 if roberta else 1, second_type_id=0 if roberta else 1)


def make_packer(tokenizer, seq_length):
    """`RobertaPacker` for byte-level BPE, `BertPacker` otherwise (ALBERT's
    SentencePiece model has [CLS]/[SEP])."""
    if tokenizer_kind(tokenizer) == BPE:
        from kerasbert.text.roberta_packer import RobertaPacker

        return RobertaPacker.from_tokenizer(tokenizer, seq_length)
    from kerasbert.text.packer import BertPacker

    return BertPacker.from_tokenizer(tokenizer, seq_length)
