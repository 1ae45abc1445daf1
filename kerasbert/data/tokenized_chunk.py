"""Tokenized documents flattened into one id array (`TokenizedChunk`): what
pretraining instances are planned over (kerasbert.data.instances).

A tokenized document is a list of sentences; a sentence a list of words; a
word a list of wordpiece ids, or a sentence is already flat as
(ids, word_starts).
"""

import numpy as np


def flatten_sentence(words):
    """[[ids of word 1], [ids of word 2], ...] -> (ids [n], word_starts [n])."""
    ids, starts = [], []
    for word in words:
        if not word:
            continue
        ids.extend(word)
        starts.append(True)
        starts.extend([False] * (len(word) - 1))
    return ids, starts


def prepare_document(document):
    """Tokenized document -> list of (ids, word_starts) per non-empty sentence."""
    prepared = []
    for sentence in document:
        ids, starts = sentence if isinstance(sentence, tuple) else flatten_sentence(sentence)
        if len(ids):
            prepared.append((list(ids), list(starts)))
    return prepared


class TokenizedChunk:
    """Documents flattened into one array: what instances are planned over.

    ids:    int64 [total] every document's wordpieces, in order;
    starts: bool [total], True where a word begins;
    bounds: per document, sentence offsets [o_0, ..., o_S] into ids
            (sentence i is ids[o_i:o_{i+1}]; empty sentences removed, so a
            document without tokens has bounds [o_0]).
    """

    __slots__ = ("ids", "starts", "bounds")

    def __init__(self, ids, starts, bounds):
        self.ids = np.asarray(ids, dtype=np.int64)
        self.starts = np.asarray(starts, dtype=bool)
        self.bounds = bounds

    @classmethod
    def from_documents(cls, documents):
        """From tokenized documents (words structure or `prepare_document` form)."""
        ids, starts, bounds = [], [], []
        for document in documents:
            offsets = [len(ids)]
            for sentence in document:
                s_ids, s_starts = (
                    sentence if isinstance(sentence, tuple) else flatten_sentence(sentence)
                )
                if len(s_ids):
                    ids.extend(s_ids)
                    starts.extend(s_starts)
                    offsets.append(len(ids))
            bounds.append(offsets)
        return cls(ids, starts, bounds)

    @classmethod
    def from_sentences(cls, ids, starts, sentence_offsets, doc_sentences):
        """From flat tokenizer output: sentence_offsets [S + 1] into ids, and
        the number of sentences of each document in order."""
        offsets = np.asarray(sentence_offsets).tolist()
        bounds, s = [], 0
        for count in doc_sentences:
            doc = offsets[s:s + count + 1]
            # Drop empty sentences (equal consecutive offsets).
            bounds.append([doc[0]] + [o for p, o in zip(doc, doc[1:]) if o > p])
            s += count
        return cls(ids, starts, bounds)

    def __len__(self):
        return len(self.bounds)
