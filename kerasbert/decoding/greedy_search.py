"""Greedy decoding (and sampling, through `pick`) over an incremental
model: one token per row and step, until every row has ended."""

from keras import ops

from kerasbert.decoding.state import write_column


def _argmax(logits, index):
    del index  # greedy does not depend on the step
    return ops.cast(ops.argmax(logits, axis=-1), "int32")


def greedy_search(step_fn, start_ids, cache, max_length, end_id=None, pick=None, limits=None):
    """Chooses one token per row and step until each row has ended.

    A row ends when it chooses `end_id`, when it has chosen `limits` tokens
    other than the end id, or after `max_length` steps; the loop stops when
    every row has ended.

    Args:
        step_fn: (token_ids int32 [B], index int32 scalar, cache) ->
            (logits float [B, V], cache). `token_ids` are the tokens chosen
            at the previous step (`start_ids` at index 0); rows that have
            ended get 0 and their logits are not read.
        start_ids: int [B].
        cache: nested tensors whose shapes do not change between steps
            (the model's key/value cache, or a token buffer).
        max_length: int or int32 scalar tensor, tokens to choose at most.
        end_id: int, or None for no end token.
        pick: (logits float32 [B, V], index int32 scalar) -> int32 [B]; the
            default is the argmax (greedy). `sampling.sampler` makes one
            that samples.
        limits: int [B], the most tokens other than the end id that each
            row may choose (a row's room in a shared buffer); default
            `max_length`.

    Returns:
        (int32 [B, max_length]: the chosen tokens, the end id included, 0
        after a row's end; int32 [B]: the tokens each row chose before its
        end id, the end id not counted).
    """
    pick = pick or _argmax
    end = -1 if end_id is None else int(end_id)
    batch = ops.shape(start_ids)[0]
    seq = ops.zeros((batch, max_length + 1), "int32")
    seq = write_column(seq, 0, ops.cast(start_ids, "int32"))
    limits = (ops.full((batch,), max_length, "int32") if limits is None
              else ops.cast(limits, "int32"))
    counts = ops.zeros((batch,), "int32")

    def cond(i, seq, counts, done, cache):
        return ops.logical_and(i < max_length, ops.logical_not(ops.all(done)))

    def body(i, seq, counts, done, cache):
        logits, cache = step_fn(ops.take(seq, i, axis=1), i, cache)
        chosen = ops.where(done, 0, pick(ops.cast(logits, "float32"), i))
        ended = chosen == end
        counts = counts + ops.cast(ops.logical_not(ops.logical_or(done, ended)), "int32")
        done = ops.logical_or(ops.logical_or(done, ended), counts >= limits)
        return i + 1, write_column(seq, i + 1, chosen), counts, done, cache

    start = (ops.convert_to_tensor(0, "int32"), seq, counts, limits <= 0, cache)
    _, seq, counts, _, _ = ops.while_loop(cond, body, start)
    return seq[:, 1:], counts
