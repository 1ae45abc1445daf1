"""Tokenizer objects from paths and run directories, and the packer and
segment layout that go with each (the family facts are `families`).

    family          tokenizer               packing
    sentencepiece   SentencePieceTokenizer  [CLS] a [SEP] b [SEP]
    bpe             BytePairTokenizer       <s> a </s></s> b </s>
    bert_bpe        BertBytePairTokenizer   [CLS] a [SEP] b [SEP] (ModernBERT's tokenizer.json)
    gpt1_bpe        Gpt1Tokenizer           <s> a </s> b </s>
    wordpiece       WordPieceTokenizer      [CLS] a [SEP] b [SEP]
    elmo_characters CharacterTokenizer      the first T words (CharacterPacker)

A fine-tuning directory stores the files under fixed names
(`SAVED_FILES`) and describes the tokenizer in config.json
(`describe_tokenizer`); `load_saved_tokenizer` reads it back, and a
directory from before the description existed loads as WordPiece from its
"vocab" entry.
"""

import dataclasses
import json
import os
import shutil

from kerasbert.sources import handles
from kerasbert.sources.source import Source
from kerasbert.sources.source import resolve
from kerasbert.errors import UsageError
from kerasbert.text.families import BERT_BPE
from kerasbert.text.families import BPE
from kerasbert.text.families import BYTES
from kerasbert.text.families import ELMO_CHARACTERS
from kerasbert.text.families import GPT1_BPE
from kerasbert.text.families import SAVED_FILES
from kerasbert.text.families import SENTENCEPIECE
from kerasbert.text.families import WORDPIECE
from kerasbert.text.tokenizer_paths import resolve_tokenizer_path
from kerasbert.text.tokenizer_paths import tokenizer_json_of
from kerasbert.text.source_tokenizers import tokenizer_options
from kerasbert.text.source_tokenizers import tokenizer_source
from kerasbert.text.tokenizer_json_files import tokenizer_json_settings



#: The tokenizer switches a command may set over what a source or a run
#: says (`load_tokenizer` / `load_saved_tokenizer` keywords; None keeps the
#: saved setting): `--special-tokens-in-strings`, `--truncate-at-nul`,
#: `--exact-unigram`.
SWITCHES = ("special_tokens_in_strings", "truncate_at_nul", "exact_unigram")

#: The constructor options each family takes (`tokenizer_settings`); an
#: option that does not apply to a family is not passed to it.
_OPTIONS = {
    WORDPIECE: ("special_tokens_in_strings", "added_tokens", "max_chars_per_word",
                "normalization", "truncate_at_nul"),
    SENTENCEPIECE: ("special_tokens_in_strings", "added_tokens", "tokenizers_unigram",
                    "truncate_at_nul", "exact_unigram"),
    BPE: ("special_tokens_in_strings", "added_tokens", "truncate_at_nul", "trim_offsets",
          "offsets_prefix_space"),
    GPT1_BPE: ("special_tokens_in_strings", "added_tokens", "truncate_at_nul"),
    BERT_BPE: ("special_tokens_in_strings", "added_tokens", "truncate_at_nul"),
    BYTES: ("special_tokens_in_strings",),
    ELMO_CHARACTERS: ("max_characters",),
}


def _construct(kind, files, lower_case, **options):
    """The tokenizer of `kind` over `files`; `options` are constructor
    options (`_OPTIONS`; None values and those that do not apply to the
    family are left out)."""
    # lazy: tensorflow (path checks and run-directory descriptions use this
    # module without it)
    from kerasbert.text.bert_byte_pair_tokenizer import BertBytePairTokenizer
    from kerasbert.text.byte_pair_tokenizer import BytePairTokenizer
    from kerasbert.text.byte_tokenizer import ByteTokenizer
    from kerasbert.text.character_tokenizer import CharacterTokenizer
    from kerasbert.text.gpt1_tokenizer import Gpt1Tokenizer
    from kerasbert.text.sentencepiece_tokenizer import SentencePieceTokenizer
    from kerasbert.text.tokenizer import WordPieceTokenizer

    options = {k: v for k, v in options.items() if v is not None and k in _OPTIONS[kind]}
    try:
        if kind == BYTES:
            return ByteTokenizer(**options)
        if kind == ELMO_CHARACTERS:
            return CharacterTokenizer(**options)
        if kind == BPE:
            # Byte-level BPE is cased by construction: lower_case does not apply.
            return BytePairTokenizer(*files, **options)
        if kind == GPT1_BPE:
            return Gpt1Tokenizer(*files, **options)  # lower-cased by construction
        if kind == BERT_BPE:
            return BertBytePairTokenizer(files[0], **options)
        cls = SentencePieceTokenizer if kind == SENTENCEPIECE else WordPieceTokenizer
        return cls(files[0], lower_case=True if lower_case is None else lower_case, **options)
    except (ValueError, FileNotFoundError, UnicodeDecodeError) as error:
        raise UsageError(f"{files[0] if files else kind}: {error}") from None


def load_tokenizer(path, lower_case=None, special_tokens_in_strings=None, truncate_at_nul=None,
                   exact_unigram=None):
    """The tokenizer a path or model handle stands for.

    Args:
        path: vocab.txt, `.model`, a BPE directory or its vocab.json, a
            `tokenizers` tokenizer.json (the tokenizer its model folder
            gives) (`resolve_tokenizer_path`); or a model: hf://..., kaggle://...,
            a Hugging Face / keras-hub / google-research/bert / TF Hub
            directory or a kerasbert run directory (`tokenizer_source`),
            or its resolved `Source`.
        lower_case: WordPiece / SentencePiece casing; None takes the
            source's setting (uncased where it has none). Ignored for
            byte-level BPE, which is always cased.
        special_tokens_in_strings: match special-token strings in text as
            the `tokenizers` library does (`kerasbert.text.special_strings`);
            None takes a run directory's setting, else False (text is text).
            True makes a published tokenizer's ids those of `tokenizers`
            reading its tokenizer.json.
        truncate_at_nul: drop the text after a NUL character, as keras-hub's
            tokenizers do (their tensorflow-text regex split reads C
            strings); None takes a run directory's setting, else False (no
            text is dropped, also for a keras-hub preset). True makes a
            keras-hub preset's ids keras-hub's on every text.
        exact_unigram: a SentencePiece (Unigram) tokenizer gives the ids of
            the library its files come from on every text (the
            `sentencepiece` library for a `.model`, `tokenizers` for a
            tokenizer.json), through kerasbert's own Unigram lattice; None
            takes a run directory's setting, else False (the op's Viterbi,
            faster; `SentencePieceTokenizer`). Ignored by other families.

    Returns:
        a `WordPieceTokenizer`, `SentencePieceTokenizer` or
        `BytePairTokenizer` (`Gpt1Tokenizer` for GPT-1's files). Invalid files raise `UsageError` naming them.
    """
    path = path if isinstance(path, Source) else os.fspath(path)
    switches = {"special_tokens_in_strings": special_tokens_in_strings,
                "truncate_at_nul": truncate_at_nul, "exact_unigram": exact_unigram}
    given = {k: v for k, v in switches.items() if v is not None}
    if isinstance(path, Source) or handles.is_remote(path) or os.path.isdir(path):
        source = resolve(path)
        if source.is_published:
            kind, files, source_lower = tokenizer_source(source)
            options = {**tokenizer_options(source, kind), **given}
            return _construct(kind, files, source_lower if lower_case is None else lower_case,
                              **options)
        path = source.path
        config = _run_config(path)
        if config is not None and "pretrain" in config and "tokenizer" not in config:
            # a pretraining run older than the tokenizer copy it now keeps
            vocab, lower = pretraining_vocab(path, config)
            return load_tokenizer(vocab, lower_case=lower if lower_case is None else lower_case,
                                  **switches)
        if config is not None:
            return load_saved_tokenizer(path, config, lower_case=lower_case, **switches)
    kind, files = resolve_tokenizer_path(path)
    tokenizer_json = tokenizer_json_of(path)
    if tokenizer_json is None:
        return _construct(kind, files, lower_case, **switches)
    # a bare tokenizer.json: the options and casing its model folder gives
    options, file_lower = tokenizer_json_settings(tokenizer_json, kind)
    return _construct(kind, files, file_lower if lower_case is None else lower_case,
                      **{**options, **given})


def _run_config(directory):
    """A kerasbert run's config.json (it describes its tokenizer), or None."""
    try:
        with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    described = ("tokenizer" in config or ("vocab" in config and "task_type" in config)
                 or "vocab" in (config.get("pretrain") or {}))
    return config if described else None


def pretraining_vocab(directory, config):
    """(tokenizer path, lower_case or None) of a pretraining run: its
    config.json's pretrain.vocab as given on its command line (relative to
    where it ran), else beside the run; the casing its data was made with."""
    vocab = config["pretrain"]["vocab"]
    if vocab == BYTES:  # no file to find
        return vocab, False
    candidates = [vocab] if os.path.isabs(vocab) else [vocab, os.path.join(directory, vocab)]
    for path in candidates:
        if os.path.exists(path):
            meta = (config.get("data") or {}).get("metadata") or {}
            return path, meta.get("lower_case")
    raise UsageError(f"{os.path.join(directory, 'config.json')} names the vocabulary {vocab}, "
                     "which is not there any more: pass --vocab.")


def tokenizer_kind(tokenizer):
    """"wordpiece", "sentencepiece" or "bpe" for a tokenizer instance."""
    kind = getattr(type(tokenizer), "family", None)
    if kind not in SAVED_FILES:
        raise TypeError(f"Not a kerasbert tokenizer: {type(tokenizer).__name__}.")
    return kind


def tokenizer_files(tokenizer):
    """The tokenizer's source file paths, in the order its class takes them
    (vocab.txt; the .model; vocab.json, merges.txt)."""
    kind = tokenizer_kind(tokenizer)
    if not SAVED_FILES[kind]:  # bytes, ELMo's characters
        return []
    if kind in (BPE, GPT1_BPE):
        return [tokenizer.vocabulary_file, tokenizer.merges_file]
    if kind == BERT_BPE:
        return [tokenizer.tokenizer_json]
    if kind == SENTENCEPIECE:
        return [tokenizer.model_file]
    return [tokenizer.vocab_file]


def tokenizer_settings(tokenizer):
    """The constructor options a tokenizer was made with (`_OPTIONS`), as
    JSON-able values: what a run's config.json keeps so that the same
    tokenizer comes back (in Python and in every export)."""
    settings = {}
    for option in _OPTIONS[tokenizer_kind(tokenizer)]:
        if hasattr(tokenizer, option):
            value = getattr(tokenizer, option)
            settings[option] = ([t.to_json() for t in value] if option == "added_tokens"
                                else value)
    return settings


def describe_tokenizer(tokenizer):
    """A JSON-able description, as config.json keeps it:
    {"type": kind, "files": names under `SAVED_FILES`, "lower_case": bool,
    and `tokenizer_settings`: "special_tokens_in_strings", "added_tokens",
    "max_chars_per_word" and "normalization" (WordPiece),
    "tokenizers_unigram" and "exact_unigram" (SentencePiece), "truncate_at_nul",
    "trim_offsets" and "offsets_prefix_space" (byte-level BPE)}."""
    kind = tokenizer_kind(tokenizer)
    return {"type": kind, "files": list(SAVED_FILES[kind]), "lower_case": bool(tokenizer.lower_case),
            **tokenizer_settings(tokenizer)}


def ids_settings(tokenizer):
    """Everything of a tokenizer that decides the ids a text gets, besides
    its files: `describe_tokenizer` without the file names ({"type",
    "lower_case", "special_tokens_in_strings", "truncate_at_nul",
    "max_chars_per_word", ...}), JSON-able. Pre-tokenized features record
    it (`create-finetuning-data`), and `finetune --features` compares it
    with the run's tokenizer."""
    description = describe_tokenizer(tokenizer)
    description.pop("files")
    return description


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


def load_saved_tokenizer(directory, config, lower_case=None, special_tokens_in_strings=None,
                         truncate_at_nul=None, exact_unigram=None):
    """The tokenizer of a fine-tuning directory, from its config.json dict,
    with the settings its description keeps (`describe_tokenizer`);
    `lower_case` / `special_tokens_in_strings` / `truncate_at_nul` /
    `exact_unigram` other than None override them.

    Directories written before config.json had a "tokenizer" entry hold a
    WordPiece vocabulary named by "vocab"; descriptions without the
    settings take the constructors' defaults.
    """
    description = config.get("tokenizer") or {"type": WORDPIECE, "files": [config["vocab"]]}
    files = saved_tokenizer_files(directory, config)
    for path in files:
        if not os.path.isfile(path):
            raise UsageError(f"{directory}: missing {os.path.basename(path)}.")
    if description["type"] not in SAVED_FILES:
        raise UsageError(f"{directory}/config.json: unknown tokenizer type {description['type']!r}.")
    if lower_case is None:
        lower_case = description.get("lower_case", config.get("lower_case", True))
    options = {k: description.get(k) for k in _OPTIONS[description["type"]]}
    for name, value in zip(SWITCHES, (special_tokens_in_strings, truncate_at_nul, exact_unigram)):
        if value is not None:
            options[name] = value
    return _construct(description["type"], files, lower_case, **options)


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

    Example:

    >>> from kerasbert.text import ByteTokenizer, segment_layout
    >>> layout = segment_layout(ByteTokenizer())    # </s> a </s> b </s>
    >>> layout.separators, layout.second_type_id
    (1, 1)
    >>> layout.second_offset(3)                     # where b starts after 3 pieces of a
    5
    >>> layout.special_tokens(pair=True)
    3
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


def make_packer(tokenizer, sequence_length):
    """`RobertaPacker` for byte-level BPE, `CharacterPacker` for ELMo's
    characters, `BertPacker` otherwise (ALBERT's SentencePiece model has
    [CLS]/[SEP])."""
    kind = tokenizer_kind(tokenizer)
    if kind == ELMO_CHARACTERS:
        from kerasbert.text.character_packer import CharacterPacker  # lazy: tensorflow

        return CharacterPacker(sequence_length, tokenizer.max_characters)
    if kind == BPE:
        from kerasbert.text.roberta_packer import RobertaPacker  # lazy: tensorflow

        return RobertaPacker.from_tokenizer(tokenizer, sequence_length)
    from kerasbert.text.packer import BertPacker  # lazy: tensorflow

    return BertPacker.from_tokenizer(tokenizer, sequence_length)
