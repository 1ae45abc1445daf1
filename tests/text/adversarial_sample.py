"""An adversarial text sample for tokenizer parity, built offline and seeded:
what published tokenizers disagree on when they disagree at all.

    long words      one word of 90-500 characters (around the 100 and 200
                    character limits and the 400 byte one) in each script:
                    Latin (accents precomposed and combining), Cyrillic,
                    Greek, Arabic, Hebrew, Devanagari, Thai, Hangul, CJK,
                    emoji; alone, in a sentence, upper-cased
    special tokens  every family's special-token strings ([CLS] [SEP] [PAD]
                    [UNK] [MASK], <s> </s> <pad> <unk> <mask>) at the start,
                    the end, inside a word ("x[SEP]y"), next to punctuation,
                    doubled, after and before every kind of whitespace, and
                    near misses ("[cls]", "[MASK", "< mask>")
    control         NUL, BEL, ESC, DEL, NEL, zero-width characters, BOM,
                    U+FFFD, line/paragraph separators, private use, a lone
                    combining mark, inserted into sample lines
    empty           "", spaces, tabs, newlines, ideographic space

The words come from the multilingual sample (tests/text/multilingual_sample.py),
so a vocabulary learned from it can split them.
"""

import random
import unicodedata

import multilingual_sample

#: Every family's special-token strings (WordPiece / SentencePiece's and
#: byte-level BPE's), matched in text when special_tokens_in_strings is on.
SPECIAL_STRINGS = ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]",
                   "<s>", "</s>", "<pad>", "<unk>", "<mask>")
NEAR_MISSES = ("[cls]", "[Mask]", "[MASK", "MASK]", "[ SEP ]", "[[SEP]]", "< mask>", "<mask >",
               "<MASK>", "</ s>", "［MASK］", "＜mask＞", "[SE\u200bP]")
SCRIPTS = ("LATIN", "CYRILLIC", "GREEK", "ARABIC", "HEBREW", "DEVANAGARI", "THAI", "HANGUL",
           "CJK", "EMOJI")
LENGTHS = (90, 99, 100, 101, 120, 150, 199, 200, 201, 250, 300, 399, 400, 401, 450, 500)
CONTROL = ("\x00", "\x07", "\x1b", "\x7f", "\x85", "\u200b", "\u200c", "\u200d", "\ufeff",
           "\ufffd", "\u2028", "\u2029", "\ue000", "\u0301", "\U000e0041", "\x0b", "\x0c", "\r")
WHITESPACE = (" ", "  ", "\t", "\n", "\u00a0", "\u3000", "\u2003", " \t ")
EMPTY = ("", " ", "  ", "\t", "\n", "\r\n", " \n ", "\u3000", "\u00a0", "\u200b", "\x00")


def _script(word):
    """The script of a word's first letter, as the Unicode name says it."""
    for char in word:
        if unicodedata.category(char).startswith("L"):
            name = unicodedata.name(char, "")
            return next((s for s in SCRIPTS if name.startswith(s)), None)
    return None


def _words_by_script(lines):
    words = {script: [] for script in SCRIPTS}
    for line in lines:
        for word in line.split():
            word = "".join(c for c in word if unicodedata.category(c)[0] in "LM")
            script = _script(word)
            if script and len(word) > 1:
                words[script].append(word)
    words["EMOJI"] = [c for line in multilingual_sample.EMOJI_LINES for c in line
                      if unicodedata.category(c) == "So"]
    words["LATIN"] += ["e\u0301te\u0301", "nai\u0308ve", "A\u030angstro\u0308m"]  # combining
    return {script: sorted(set(w)) for script, w in words.items() if w}


def _long_word(words, length, rng):
    """Words of one script glued together, cut to `length` characters."""
    text = ""
    while len(text) < length:
        text += rng.choice(words)
    return text[:length]


def adversarial_lines(seed=0, lines=None):
    """The sample, a list of unique strings in a fixed order.

    Args:
        seed: the random choices (words, positions).
        lines: the text to take words and host sentences from (default:
            a 3,000-line multilingual sample).
    """
    rng = random.Random(seed)
    if lines is None:
        lines = multilingual_sample.multilingual_lines(min_lines=3000, faker_per_locale=40)
    hosts = [line for line in lines if 20 <= len(line) <= 120]
    words = _words_by_script(lines)
    out = list(EMPTY)
    for script, pool in words.items():
        for length in LENGTHS:
            word = _long_word(pool, length, rng)
            host = rng.choice(hosts)
            out += [word, f"{host} {word} {rng.choice(hosts)}", f"{word}, {host}", word.upper(),
                    f"({word})", f"{word} {_long_word(pool, length // 2, rng)}"]
    for token in SPECIAL_STRINGS + NEAR_MISSES:
        for _ in range(3):
            host = rng.choice(hosts)
            cut = rng.randrange(len(host))
            word = rng.choice(host.split())
            space = rng.choice(WHITESPACE)
            out += [
                f"{token} {host}", f"{host} {token}", f"{host[:cut]}{token}{host[cut:]}",
                f"{word}{token}{word}", f"({token}).", f"{token}{token}",
                f"{host}{space}{token}{space}{word}", f"{space}{token}{space}",
                f"{token}{rng.choice(SPECIAL_STRINGS)}{word}", f"x{token}y",
                f"{word} {token}, {token}! {word}", token,
            ]
    for _ in range(400):
        host = list(rng.choice(hosts))
        for _ in range(rng.randint(1, 3)):
            host.insert(rng.randrange(len(host) + 1), rng.choice(CONTROL))
        out.append("".join(host))
    for char in CONTROL + WHITESPACE:
        out += [char, f"a{char}b", f"{char}{rng.choice(hosts)}{char}"]
    seen, unique = set(), []
    for line in out:
        if line not in seen:
            seen.add(line)
            unique.append(line)
    return unique


def has_special_string(line, tokens=SPECIAL_STRINGS):
    """Whether `line` holds any of `tokens` as a substring."""
    return any(token in line for token in tokens)
