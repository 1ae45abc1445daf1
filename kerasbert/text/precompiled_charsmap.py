"""A SentencePiece normalization rule set (a "precompiled charsmap") as the
`tokenizers` library's `Precompiled` normalizer applies it, in TensorFlow
ops.

The charsmap is a Darts-clone double-array trie of key strings and, after
it, their NUL-terminated replacements. SentencePiece replaces the longest
key at each position (the op does that). `tokenizers` works per extended
grapheme cluster (Unicode's UAX #29, as the `unicode-segmentation` crate
finds them):

    grapheme of < 6 UTF-8 bytes      replaced as a whole by the replacement
      that starts with a key         of its SHORTEST key prefix (the rest of
                                     the grapheme is dropped: "A" + U+0302 +
                                     U+0300 becomes "Â", not "Ầ")
    otherwise                        character by character: a character
                                     that is a key is replaced, others kept
                                     (Greek "Ϊ́" of 6 bytes stays decomposed;
                                     conjoining Hangul jamo stay jamo)

So only keys of at most 5 bytes ever apply, and only those are kept here.
Grapheme clusters come from UAX #29's boundary rules (GB3-GB13: CR LF,
controls, Hangul syllable sequences, extending and spacing marks,
prepends, Indic conjuncts, emoji ZWJ sequences, regional-indicator pairs)
evaluated on every pair of neighbouring characters at once; the character
classes are read from the `regex` package's Unicode data (a dependency of
keras-hub) when the first normalizer is built.
"""

import functools
import struct

import numpy as np
import tensorflow as tf

from kerasbert.text.unigram_lattice import characters
from kerasbert.text.unigram_lattice import row_ids


#: `tokenizers` replaces a grapheme as a whole below this many bytes.
WHOLE_GRAPHEME_BYTES = 6
#: A value no replacement can hold (they are NUL-terminated).
_MISSING = "\x00"


def charsmap_entries(blob, max_bytes=WHOLE_GRAPHEME_BYTES - 1):
    """{key: replacement} (bytes) of a precompiled charsmap, keys of at most
    `max_bytes` bytes.

    The blob: a little-endian uint32 (the trie's size in bytes), the trie's
    uint32 units, then the replacements. A unit holds a label (its byte),
    an offset to its children and a leaf flag; a leaf's value is the
    replacement's offset. The trie is walked a byte level at a time, every
    label tried at once (NumPy).
    """
    if len(blob) < 4:
        return {}
    size = struct.unpack_from("<I", blob, 0)[0]
    if size % 4 or 4 + size > len(blob):
        raise ValueError("not a precompiled charsmap (its trie size is wrong)")
    units = np.frombuffer(blob, "<u4", count=size // 4, offset=4).astype(np.int64)
    if not len(units):
        return {}
    strings = blob[4 + size:]

    def offset(unit):
        return (unit >> 10) << ((unit & (1 << 9)) >> 6)

    labels = np.arange(1, 256, dtype=np.int64)
    positions, keys = np.array([offset(units[0])]), [b""]
    entries = {}
    for _ in range(max_bytes):
        child = positions[:, None] ^ labels[None, :]
        inside = child < len(units)
        unit = units[np.where(inside, child, 0)]
        matched = inside & ((unit & ((1 << 31) | 0xFF)) == labels[None, :])
        rows, columns = np.nonzero(matched)
        unit = unit[rows, columns]
        positions = child[rows, columns] ^ offset(unit)
        keys = [keys[r] + bytes([c + 1]) for r, c in zip(rows.tolist(), columns.tolist())]
        for i in np.nonzero((unit >> 8) & 1)[0].tolist():
            start = int(units[positions[i]] & ((1 << 31) - 1))
            end = strings.find(b"\0", start)
            entries[keys[i]] = strings[start:end if end >= 0 else len(strings)]
        if not len(positions):
            break
    return entries


# Grapheme_Cluster_Break values (UAX #29) as codes of `grapheme_classes`;
# bit 4: Extended_Pictographic; bits 5-6: Indic_Conjunct_Break.
_GCB = ("Other", "CR", "LF", "Control", "Extend", "ZWJ", "Regional_Indicator", "Prepend",
        "SpacingMark", "L", "V", "T", "LV", "LVT")
(OTHER, CR, LF, CONTROL, EXTEND, ZWJ, RI, PREPEND, SPACING_MARK, L, V, T, LV,
 LVT) = range(len(_GCB))
PICTOGRAPHIC = 16
_INCB = ("None", "Consonant", "Linker", "Extend")
CONSONANT, LINKER, INCB_EXTEND = 1, 2, 3


@functools.lru_cache(maxsize=None)
def grapheme_classes():
    """(starts, classes): the code points where the class of a character
    (its Grapheme_Cluster_Break code, + `PICTOGRAPHIC`, + 32 x its
    Indic_Conjunct_Break code) changes, and the class from there on; read
    from the `regex` package's Unicode data."""
    import regex  # lazy: Unicode property data, for this normalizer only

    everything = "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, 0x110000)))
    classes = np.zeros(0x110000, np.int32)

    def mark(prop, value):
        for m in regex.finditer(rf"\p{{{prop}}}+", everything):
            # String positions past the surrogates (which no text holds)
            # are code points 0x800 further.
            for a, b in ((m.start(), min(m.end(), 0xD800)), (max(m.start(), 0xD800), m.end())):
                if a < b:
                    shift = 0x800 if a >= 0xD800 else 0
                    classes[a + shift:b + shift] += value

    for code, name in enumerate(_GCB[1:], 1):
        mark(f"Grapheme_Cluster_Break={name}", code)
    mark("Extended_Pictographic", PICTOGRAPHIC)
    for code, name in enumerate(_INCB[1:], 1):
        mark(f"Indic_Conjunct_Break={name}", 32 * code)
    starts = np.concatenate([[0], np.nonzero(np.diff(classes))[0] + 1])
    return starts.astype(np.int32), classes[starts]


def _last_before(flags, position):
    """For each position, the last index before it whose flag is set (-1:
    none)."""
    where = tf.where(flags)[:, 0]
    found = tf.raw_ops.LowerBound(sorted_inputs=where[None], values=position[None],
                                  out_type=tf.int64)[0]
    return tf.gather(tf.concat([[-1], where], 0), found)


def _at(values, index):
    """values[index], with index -1 reading the first value (callers mask it)."""
    return tf.gather(values, tf.maximum(index, 0))


def grapheme_starts(code_points, row_start):
    """Which characters start an extended grapheme cluster (UAX #29).

    Args:
        code_points: int32 [C], texts one after the other.
        row_start: int64 [C], the index of each character's text's first
            character.

    Returns:
        bool [C].
    """
    starts, classes = grapheme_classes()
    kind = tf.gather(tf.constant(classes), tf.raw_ops.UpperBound(
        sorted_inputs=tf.constant(starts)[None], values=code_points[None],
        out_type=tf.int64)[0] - 1)
    gcb, pictographic, incb = kind % 16, (kind // 16) % 2 > 0, kind // 32
    position = tf.range(tf.size(code_points, out_type=tf.int64))
    before = tf.concat([[OTHER], gcb[:-1]], 0)

    def one_of(x, *values):  # a bit per class
        return tf.not_equal(tf.bitwise.bitwise_and(tf.bitwise.left_shift(1, x),
                                                   sum(1 << v for v in values)), 0)

    crlf = tf.equal(before, CR) & tf.equal(gcb, LF)  # GB3
    control = one_of(before, CR, LF, CONTROL) | one_of(gcb, CR, LF, CONTROL)  # GB4, GB5
    hangul = ((tf.equal(before, L) & one_of(gcb, L, V, LV, LVT))  # GB6-GB8
              | (one_of(before, LV, V) & one_of(gcb, V, T))
              | (one_of(before, LVT, T) & tf.equal(gcb, T)))
    extend = one_of(gcb, EXTEND, ZWJ, SPACING_MARK) | tf.equal(before, PREPEND)  # GB9-GB9b
    # GB9c: Consonant [Extend Linker]* Linker [Extend Linker]* x Consonant.
    chain = _last_before(~one_of(incb, INCB_EXTEND, LINKER), position)
    linkers = tf.cumsum(tf.cast(tf.equal(incb, LINKER), tf.int64))
    conjunct = (tf.equal(incb, CONSONANT) & (chain >= row_start)
                & tf.equal(_at(incb, chain), CONSONANT)
                & (_at(linkers, position - 1) - _at(linkers, chain) > 0))
    # GB11: ExtPict Extend* ZWJ x ExtPict.
    emoji_start = _last_before(tf.not_equal(gcb, EXTEND), position - 1)
    emoji = (pictographic & tf.equal(before, ZWJ) & (emoji_start >= row_start)
             & _at(pictographic, emoji_start))
    # GB12, GB13: regional indicators in pairs.
    run_start = tf.maximum(_last_before(tf.not_equal(gcb, RI), position), row_start - 1)
    flags = tf.equal(gcb, RI) & tf.equal(before, RI) & tf.equal((position - 1 - run_start) % 2, 1)
    joined = crlf | (~control & (hangul | extend | conjunct | emoji | flags))
    return tf.equal(position, row_start) | ~joined


class PrecompiledNormalizer(tf.Module):
    """`tokenizers`' Precompiled normalizer over a charsmap blob.

    `normalize(texts)` gives the normalized characters with the original
    bytes each comes from, so pieces of the normalized text map back.
    """

    def __init__(self, charsmap, name=None):
        super().__init__(name=name)
        entries = charsmap_entries(charsmap)
        keys = [k.decode("utf-8") for k in entries] or [_MISSING]
        values = [v.decode("utf-8") for v in entries.values()] or [_MISSING]
        self._table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(keys, tf.string),
                                                tf.constant(values, tf.string)),
            default_value=tf.constant(_MISSING, tf.string))
        #: The longest key, in characters (a grapheme's prefixes up to it are looked up).
        self._max_key_chars = max(len(k) for k in keys)
        grapheme_classes()  # read once, before any tracing

    @tf.autograph.experimental.do_not_convert
    def normalize(self, texts):
        """Normalized characters of `texts` [B].

        Returns:
            (chars, splits, starts, ends): the normalized characters [N]
            (strings) text after text, their row splits [B + 1] and, per
            character, the original byte span [start, end) it comes from
            (int64; a grapheme replaced as a whole: its span for its
            characters).
        """
        char_of, code_points, splits, start, end = characters(texts)
        n = tf.size(char_of, out_type=tf.int64)
        first = grapheme_starts(code_points, tf.gather(splits, row_ids(splits)))
        grapheme = tf.cumsum(tf.cast(first, tf.int64)) - 1
        g_first = tf.where(first)[:, 0]
        graphemes = tf.size(g_first, out_type=tf.int64)
        g_count = tf.concat([g_first[1:], n[None]], 0) - g_first
        g_size = tf.math.unsorted_segment_sum(end - start, grapheme, graphemes)
        value = self._table.lookup(char_of)
        each = tf.where(tf.equal(value, _MISSING), char_of, value)
        # Graphemes of several characters and fewer than 6 bytes: the
        # replacement of their shortest key prefix, if any.
        short = tf.where((g_size < WHOLE_GRAPHEME_BYTES) & (g_count > 1))[:, 0]
        short_first, short_count = tf.gather(g_first, short), tf.gather(g_count, short)
        prefix = tf.fill(tf.shape(short), "")
        best = tf.fill(tf.shape(short), tf.constant(_MISSING, tf.string))
        for k in range(1, self._max_key_chars + 1):
            k = tf.constant(k, tf.int64)
            prefix = tf.strings.join([prefix, tf.gather(
                char_of, short_first + tf.minimum(k, short_count) - 1)])
            found = self._table.lookup(prefix)
            best = tf.where((k <= short_count) & tf.equal(best, _MISSING), found, best)
        # A whole grapheme: its replacement on its first character, nothing
        # on the others, and its span on each.
        replaced = tf.where(tf.not_equal(best, _MISSING))[:, 0]
        whole = tf.scatter_nd(tf.gather(short, replaced)[:, None],
                              tf.ones(tf.shape(replaced), tf.int32), graphemes[None])
        replacement = tf.scatter_nd(tf.gather(short, replaced)[:, None],
                                    tf.gather(best, replaced), graphemes[None])
        in_whole = tf.gather(whole, grapheme) > 0
        out = tf.where(in_whole, tf.where(first, tf.gather(replacement, grapheme), ""), each)
        g_end = tf.gather(end, tf.concat([g_first[1:], n[None]], 0) - 1)
        end = tf.where(in_whole, tf.gather(g_end, grapheme), end)
        # The output characters, each with its source's span.
        chars, _, char_splits, _, _ = characters(out)
        source = row_ids(char_splits)
        return (chars, tf.gather(char_splits, splits), tf.gather(start, source),
                tf.gather(end, source))
