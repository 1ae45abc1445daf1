"""Special-token strings in input text: which strings a tokenizer matches as
one id each, and how, in plain Python (no TensorFlow). The TensorFlow side
(splitting texts at the matches) is `added_token_splitter.AddedTokenSplitter`,
which `SubwordTokenizer` builds from these tokens.

`special_tokens_in_strings` is the one switch, on every tokenizer family:

    False (the default)   text is text: "[SEP]" typed by a client becomes
                          "[", "sep", "]" (BERT's own tokenizer; a served
                          model's client cannot inject control tokens)
    True                  as the Hugging Face `tokenizers` library treats its
                          special ("added") tokens: matched in the raw string
                          before normalization, case-sensitively, anywhere
                          ("x[SEP]y" -> x, [SEP], y), as one id each, with the
                          token's flags (`AddedToken`)

Added tokens that are NOT special (a vocabulary's extra words, registered as
added tokens in a tokenizer.json) are matched in both settings, as
`tokenizers` matches them.
"""

import dataclasses
import re

from kerasbert.text.families import BERT_BPE
from kerasbert.text.families import BPE
from kerasbert.text.families import BYTES
from kerasbert.text.families import SENTENCEPIECE
from kerasbert.text.families import SPECIAL_TOKENS

#: Unicode White_Space (Rust's `char::is_whitespace`, what `tokenizers`
#: strips for lstrip/rstrip), and the same as RE2 class content.
WHITESPACE_CHARACTERS = ("\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
                         + "\u2028\u2029\u202f\u205f\u3000")
WHITESPACE = "".join(f"\\x{{{ord(c):X}}}" for c in WHITESPACE_CHARACTERS)
#: A "word character" next to a `single_word` token: Rust regex's Unicode
#: \w (letters, marks, decimal digits, connector punctuation, joiners), which
#: RE2 spells with general categories.
WORD_CHARACTER = r"[\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}]"

#: Special tokens that absorb the whitespace before them (lstrip), as the
#: source libraries register them: RoBERTa's and ALBERT's mask tokens
#: (transformers' RobertaTokenizer / AlbertTokenizer), so "a <mask>" is
#: "a" + "<mask>" with no stray space piece.
LSTRIP_SPECIALS = {BPE: ("<mask>",), SENTENCEPIECE: ("[MASK]",), BERT_BPE: ("[MASK]",)}


@dataclasses.dataclass(frozen=True)
class AddedToken:
    """One string a tokenizer matches in text as one id (the `tokenizers`
    library's AddedToken, with its flags).

    Attributes:
        content: the string, matched case-sensitively.
        special: a control token ([CLS], <mask>, ...): matched only with
            `special_tokens_in_strings`; a non-special added token is
            always matched.
        lstrip, rstrip: the match also takes the whitespace before / after.
        single_word: matched only where no word character touches it.
        normalized: matched in the normalized text (lower-cased, accents
            stripped for an uncased WordPiece vocabulary) instead of the raw
            one.

    Example:

    >>> import os, tempfile
    >>> from kerasbert.text import AddedToken, WordPieceTokenizer, write_vocab
    >>> vocab = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> write_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello"], vocab)
    >>> tokenizer = WordPieceTokenizer(vocab, special_tokens_in_strings=True,
    ...                                added_tokens=[AddedToken("[MASK]")])
    >>> tokenizer.tokenize_ids(["hello [MASK]"]).to_list()   # "[MASK]" is one id
    [[5, 4]]
    """

    content: str
    special: bool = True
    lstrip: bool = False
    rstrip: bool = False
    single_word: bool = False
    normalized: bool = False

    _FLAGS = ("special", "lstrip", "rstrip", "single_word", "normalized")

    @classmethod
    def from_json(cls, entry, source):
        """From a tokenizer.json `added_tokens` entry (or our description's).

        Raises:
            ValueError: naming `source` and what is wrong with the entry.
        """
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str) \
                or not entry["content"]:
            raise ValueError(f"{source}: an added token must have a non-empty string "
                             f"'content', got {entry!r}.")
        flags = {}
        for flag in cls._FLAGS:
            value = entry.get(flag, cls.__dataclass_fields__[flag].default)
            if not isinstance(value, bool):
                raise ValueError(f"{source}: added token {entry['content']!r} has "
                                 f"{flag}={value!r}; expected true or false.")
            flags[flag] = value
        return cls(entry["content"], **flags)

    def to_json(self):
        """{"content": ..., and the flags that differ from the defaults}."""
        entry = {"content": self.content}
        for flag in self._FLAGS:
            value = getattr(self, flag)
            if value != self.__dataclass_fields__[flag].default:
                entry[flag] = value
        return entry


def default_added_tokens(kind, tokens):
    """The special tokens a family's source library registers for a
    vocabulary that does not list its own (a vocab.txt, a .model, a
    vocab.json): the family's `SPECIAL_TOKENS` that the vocabulary holds
    (GPT-1's appended ones are ours, not the source's: left out), with
    `LSTRIP_SPECIALS`' flag; none for the byte vocabulary.

    Args:
        kind: the family.
        tokens: the vocabulary FILE's tokens (for GPT-1 without the
            specials we append, which its source does not know).
    """
    if kind == BYTES:
        return []
    present = set(tokens)
    lstrip = LSTRIP_SPECIALS.get(kind, ())
    seen, result = set(), []
    for token in SPECIAL_TOKENS[kind].values():
        if token in present and token not in seen:
            seen.add(token)
            result.append(AddedToken(token, lstrip=token in lstrip))
    return result


def as_added_tokens(entries, source):
    """A list of `AddedToken`s from AddedTokens, dicts or strings (a string
    is a special token with no flags)."""
    result = []
    for entry in entries:
        if isinstance(entry, AddedToken):
            result.append(entry)
        elif isinstance(entry, str):
            result.append(AddedToken(entry))
        else:
            result.append(AddedToken.from_json(entry, source))
    return result


def _escape(text):
    """RE2 literal for `text`: every ASCII character that is not a letter
    or digit as \\x{..} (RE2 rejects some of Python's `re.escape` forms)."""
    return "".join(c if c.isalnum() or ord(c) > 127 else f"\\x{{{ord(c):X}}}" for c in text)


def match_pattern(tokens, contents=None):
    """An RE2 pattern matching any of `tokens` in text, or None for none.

    Longer contents come first, so RE2's leftmost-first alternation finds
    the leftmost-longest match, as `tokenizers`' Aho-Corasick automaton
    does; lstrip / rstrip tokens take the whitespace around them.

    Args:
        tokens: `AddedToken`s.
        contents: the strings to match (default: each token's content;
            the normalized contents for a normalized-text match).
    """
    contents = [t.content for t in tokens] if contents is None else list(contents)
    if not contents:
        return None
    parts = []
    for token, content in sorted(zip(tokens, contents), key=lambda tc: -len(tc[1].encode())):
        part = _escape(content)
        if token.lstrip:
            part = f"[{WHITESPACE}]*" + part
        if token.rstrip:
            part += f"[{WHITESPACE}]*"
        parts.append(part)
    return "|".join(parts)


def matched_tokens(tokens, special_tokens_in_strings):
    """The tokens matched in text: every non-special added token, and the
    special ones when `special_tokens_in_strings`."""
    return [t for t in tokens if special_tokens_in_strings or not t.special]


def split_at_token(text, token):
    """`text` cut at each occurrence of `token` (an `AddedToken`) as the
    `tokenizers` library cuts it: an lstrip / rstrip token takes the
    whitespace before / after it with it. Returns the texts between the
    occurrences (one more than there are), for a caller that puts the
    token's id between their pieces (fill-mask's masks)."""
    space = f"[{re.escape(WHITESPACE_CHARACTERS)}]*"
    pattern = ((space if token.lstrip else "") + re.escape(token.content)
               + (space if token.rstrip else ""))
    return re.split(pattern, text)
