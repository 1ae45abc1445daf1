"""Pretraining instances from tokenized documents: pure functions.

Documents in, instances out: no I/O, no globals, randomness only from the
`numpy.random.Generator` passed in, so a cluster runner can call these
directly. The algorithm is google-research/bert's `create_pretraining_data.py`
(chunk accumulation, NSP with a random B from another document, unused
segments put back, `truncate_seq_pair`, static masking), with ALBERT's SOP
and RoBERTa's FULL-SENTENCES packing as alternatives.

A tokenized document is a list of sentences; a sentence a list of words; a
word a list of wordpiece ids. Word boundaries are kept so whole-word masking
never splits a word.

How it is fast (the writer makes ~30,000 instances per MB of text at the
default dupe factor 10, so per-instance Python is the cost that matters):
  * the documents of a batch are flattened once into one id array
    (`TokenizedChunk`); the per-document logic only PLANS instances as
    integer spans into it (`plan_pairs`, `plan_full_sentences`), with
    uniforms drawn from numpy in blocks (`Draws`);
  * truncation, assembly `[CLS] A [SEP] B [SEP]`, masking and the
    tf.train.Example serialization then run on whole [N, T] numpy arrays
    (`Batch`, `mask_batch`, `ExampleEncoder.encode_batch`).
The per-document functions (`create_instances_from_document`, ...) are thin
wrappers over the same code, so the statistical tests check what the writer
runs. Each step has its module: instance_types (Specials, InstanceOptions,
Instance), tokenized_chunk, instance_planning, instance_batches,
example_encoder; this one drives them (`chunk_batches`, the per-document
functions) and re-exports their public names.

Deliberate differences from the original, all documented here:
  * num_to_predict counts MASKABLE tokens (not [CLS]/[SEP]), so the chosen
    fraction is exactly masked_lm_prob of the tokens that can be chosen (the
    original's counts the 3 specials too: 15.4% at length 128).
  * The random B of NSP comes from `other_documents` (a bounded buffer of
    nearby documents the caller passes in), not the whole corpus, so the
    corpus never has to be in memory. With no other document, B is the real
    next segment; a lone segment with nothing to pair is dropped.
  * NSP with a one-segment chunk: "real next" cuts the segment at a random
    word boundary instead of always taking a random B, so labels stay 50/50.
  * SOP with a one-segment chunk splits that segment at a random word
    boundary (ALBERT pairs it with a random document instead, which is not
    an order-swap example).
  * truncate_seq_pair draws how many of a side's cuts come from the front
    as one Binomial(cuts, 1/2) instead of one coin per token (the same
    distribution; which side is cut how much is the original's rule).
"""

from kerasbert.data.example_encoder import ExampleEncoder  # noqa: F401
from kerasbert.data.instance_batches import Batch  # noqa: F401
from kerasbert.data.instance_batches import mask_batch
from kerasbert.data.instance_batches import pair_batch
from kerasbert.data.instance_batches import span_batch
from kerasbert.data.instance_batches import truncate_seq_pair  # noqa: F401
from kerasbert.data.instance_batches import truncation_cuts  # noqa: F401
from kerasbert.data.instance_planning import Draws
from kerasbert.data.instance_planning import OtherDocuments
from kerasbert.data.instance_planning import PairPlan
from kerasbert.data.instance_planning import plan_full_sentences
from kerasbert.data.instance_planning import plan_pairs
from kerasbert.data.instance_types import Instance  # noqa: F401
from kerasbert.data.instance_types import InstanceOptions  # noqa: F401
from kerasbert.data.instance_types import Specials  # noqa: F401
from kerasbert.data.tokenized_chunk import flatten_sentence  # noqa: F401
from kerasbert.data.tokenized_chunk import prepare_document  # noqa: F401
from kerasbert.data.tokenized_chunk import TokenizedChunk


def chunk_batches(chunk, options, specials, rng, dupe_factor=1):
    """Yields one masked (unless options.masking is False) Batch per dupe of
    a TokenizedChunk: the writer's unit of work. NSP's random B comes from
    the chunk's other documents."""
    docs = [d for d, bounds in enumerate(chunk.bounds) if len(bounds) > 1]
    draws = Draws(rng)
    with_starts = options.whole_word_mask
    for _ in range(dupe_factor):
        if options.objective == "none":
            planned = plan_full_sentences(chunk, options)
            if not planned:
                continue
            batch = span_batch(chunk, planned, options, specials)
        else:
            plan = PairPlan()
            for j, d in enumerate(docs):
                plan_pairs(chunk, d, OtherDocuments(docs, j), options, draws, plan)
            if not len(plan):
                continue
            batch = pair_batch(chunk, plan, options, specials, rng, with_starts)
        if options.masking:
            mask_batch(batch, options, specials, rng)
        yield batch


# ------------------------------------------------- per-document interface


def create_instances_from_document(document, other_documents, options, specials, rng):
    """Instances (NSP or SOP) from one document.

    document:        tokenized document (words structure) or `prepare_document`
                     output.
    other_documents: a bounded buffer of OTHER documents (same forms) from
                     which NSP draws random B segments; may be empty.
    rng:             numpy Generator, derived by the caller from
                     (seed, dupe, document index) for reproducibility.
    Returns a list of `Instance`.
    """
    chunk = TokenizedChunk.from_documents([document, *other_documents])
    others = [d for d in range(1, len(chunk)) if len(chunk.bounds[d]) > 1]
    plan = PairPlan()
    plan_pairs(chunk, 0, others, options, Draws(rng), plan)
    if not len(plan):
        return []
    batch = pair_batch(chunk, plan, options, specials, rng, with_starts=True)
    if options.masking:
        mask_batch(batch, options, specials, rng)
    return batch.to_instances()


def create_full_sentence_instances(documents, options, specials, rng):
    """RoBERTa FULL-SENTENCES: `[CLS] s1 s2 ... [SEP]`, single segment.

    Contiguous full sentences are packed up to sequence_length - 2 tokens and
    MAY CROSS DOCUMENT BOUNDARIES, as in RoBERTa; a [SEP] marks each boundary
    inside a sequence. Crossing happens within the `documents` passed
    together (one writer chunk), so this stays a pure function of its
    inputs. No short sequences, no sentence label.
    """
    chunk = TokenizedChunk.from_documents(documents)
    planned = plan_full_sentences(chunk, options)
    if not planned:
        return []
    batch = span_batch(chunk, planned, options, specials)
    if options.masking:
        mask_batch(batch, options, specials, rng)
    return batch.to_instances()
