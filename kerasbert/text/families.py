"""What each tokenizer family is, in plain Python (no TensorFlow): its
special tokens and word-start markers, the files that carry it, how a
`--vocab` path names it (`tokenizer_paths` resolves one). The tokenizer
classes, the loaders and the command-line checks all take these facts from
here.

    path                                   family          files
    *.model                                sentencepiece   the model
    a tokenizer.json (or a DIR whose only  its model's     vocab.txt, .model, ... rebuilt
      tokenizer file it is)                                  from it, cached
    DIR with vocab.json + merges.txt,      bpe             vocab.json, merges.txt
      or .../vocab.json (merges.txt beside)
    the same, tokens ending in "</w>"      gpt1_bpe        vocab.json, merges.txt
    a tokenizer.json of a byte-level BPE   bert_bpe        tokenizer.json
      packed [CLS] a [SEP] (ModernBERT)
    anything else (vocab.txt)              wordpiece       vocab.txt
    the word "bytes"                       bytes           (none: UTF-8 bytes + 2)
    (an ELMo backbone, no --vocab)         elmo_characters (none: each word's UTF-8 bytes)
"""

import json
import os


WORDPIECE, SENTENCEPIECE, BPE = "wordpiece", "sentencepiece", "bpe"
#: GPT-1's BPE: lower-cased BERT pre-tokenization, character-level merges
#: with "</w>" closing each word (no byte fallback).
GPT1_BPE = "gpt1_bpe"
BPE_VOCABULARY, BPE_MERGES = "vocab.json", "merges.txt"
#: Byte-level BPE with BERT's special tokens and packing, read from the
#: `tokenizers` library's tokenizer.json (ModernBERT's, OLMo's vocabulary):
#: NFC normalization, GPT-2's pre-tokenizer, [CLS] a [SEP] b [SEP].
BERT_BPE = "bert_bpe"
TOKENIZER_JSON = "tokenizer.json"
#: Character-level text as the Reformer's enwik8 model reads it: id = UTF-8
#: byte + 2, 0 = <pad>, 1 = </s>; `--vocab bytes` names it (no file).
BYTES = "bytes"
#: ELMo's character input (`kerasbert.text.character_tokenizer`): each
#: word's UTF-8 bytes numbered as the published biLM numbers them; no file.
ELMO_CHARACTERS = "elmo_characters"

#: File names a fine-tuning directory keeps each family's files under, in
#: the order the tokenizer class takes them. Fixed names keep user file
#: names from colliding with config.json / model.keras.
SAVED_FILES = {
    WORDPIECE: ("vocab.txt",),
    SENTENCEPIECE: ("sentencepiece.model",),
    BPE: (BPE_VOCABULARY, BPE_MERGES),
    GPT1_BPE: (BPE_VOCABULARY, BPE_MERGES),
    BERT_BPE: (TOKENIZER_JSON,),
    BYTES: (),
    ELMO_CHARACTERS: (),
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
    # GPT-1 publishes none of them: those missing are appended (`with_added_specials`).
    GPT1_BPE: {"cls_id": "<s>", "pad_id": "<pad>", "sep_id": "</s>", "unk_id": "<unk>",
               "mask_id": "<mask>"},
    BERT_BPE: {"pad_id": "[PAD]", "unk_id": "[UNK]", "cls_id": "[CLS]",
               "sep_id": "[SEP]", "mask_id": "[MASK]"},
    # One boundary token opens and closes a sequence; no [MASK] (causal LMs).
    BYTES: {"pad_id": "<pad>", "unk_id": "<pad>", "cls_id": "</s>", "sep_id": "</s>"},
}
#: GPT-1's word-end marker: the last piece of every word ends with it.
WORD_END = "</w>"
#: How a piece says it begins a word: SentencePiece's "▁" and byte-level
#: BPE's "Ġ" (a leading space) prefix word-initial pieces; WordPiece marks
#: the others ("##" continuations).
WORD_START = {SENTENCEPIECE: "\u2581", BPE: "\u0120", BERT_BPE: "\u0120"}
SUFFIX_INDICATOR = "##"


def byte_vocabulary():
    """The BYTES family's tokens in id order: <pad>, </s>, then <0x00> ..
    <0xFF>."""
    return ["<pad>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]


def word_starts(kind, tokens):
    """Per token of a vocabulary (id order), whether a piece with that id
    begins a word; the rest continue the word before them (what whole-word
    masking and `SubwordTokenizer.tokenize`'s word groups use). Every byte
    is a word of its own."""
    if kind == BYTES:
        return [True] * len(tokens)
    if kind == WORDPIECE:
        return [not (t.startswith(SUFFIX_INDICATOR) and len(t) > len(SUFFIX_INDICATOR))
                for t in tokens]
    return [t.startswith(WORD_START[kind]) for t in tokens]


_FAMILY_WORDS = {WORDPIECE: "a BERT vocabulary", SENTENCEPIECE: "an ALBERT model",
                 BPE: "a RoBERTa vocabulary", GPT1_BPE: "a GPT-1 vocabulary",
                 BERT_BPE: "a ModernBERT tokenizer.json",
                 BYTES: "the byte vocabulary"}


def with_added_specials(kind, tokens):
    """(tokens, number appended): a GPT-1 vocabulary with the special tokens
    it lacks appended after its published ids, in `SPECIAL_TOKENS` order
    (the GPT paper likewise adds start/delimiter/extract embeddings for
    fine-tuning). Other families are returned unchanged."""
    if kind != GPT1_BPE:
        return list(tokens), 0
    present = set(tokens)
    added = [t for t in SPECIAL_TOKENS[GPT1_BPE].values() if t not in present]
    return list(tokens) + added, len(added)


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


def added_special_count(kind, files, tokens):
    """How many of `read_vocabulary`'s tokens were appended to the files'
    own (`with_added_specials`; 0 except for GPT-1)."""
    return len(tokens) - len(load_bpe_vocab(files[0])) if kind == GPT1_BPE else 0


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


#: The tokenizer files a Hugging Face model directory may hold, in the order
#: they are looked for (vocab.json + merges.txt is the BPE case above them).
HF_TOKENIZER_FILES = (BPE_VOCABULARY, "vocab.txt", "spiece.model", "sentencepiece.bpe.model")


def absolute_vocab(path):
    """A `--vocab` value as a run records it: a file path made absolute
    (it is read from other working directories), "bytes" as it is."""
    return path if os.fspath(path) == BYTES else os.path.abspath(path)
