"""Fixed-shape state of the decoding loops: sequence buffers written one
column per step, and beams picked, merged and split along axis 1.

Every helper keeps shapes that do not change from step to step, which is
what `ops.while_loop` needs on every backend (TensorFlow's loop variables,
JAX's carry)."""

import keras
from keras import ops


def write_column(seq, index, values):
    """seq int [..., L] with column `index` (int scalar) set to values
    [...]; an index outside [0, L) changes nothing."""
    # A select against the column numbers instead of a scatter: the same op
    # on every backend, and a dynamic index needs no shape information.
    columns = ops.arange(ops.shape(seq)[-1], dtype="int32")
    return ops.where(columns == index, ops.expand_dims(values, -1), seq)


def gather_beams(tree, indices):
    """Each [B, K, ...] leaf of `tree` indexed along axis 1 by int [B, K']
    -> [B, K', ...] (a nested structure of the same shape as `tree`)."""

    def gather_leaf(x):
        # take_along_axis needs the index broadcast over the trailing axes.
        shape = ops.shape(x)
        index = ops.reshape(ops.cast(indices, "int32"),
                            tuple(ops.shape(indices)) + (1,) * (len(x.shape) - 2))
        index = ops.broadcast_to(index, (shape[0], ops.shape(indices)[1]) + tuple(shape[2:]))
        return ops.take_along_axis(x, index, axis=1)

    return keras.tree.map_structure(gather_leaf, tree)


def flatten_beams(x):
    """[B, K, ...] -> [B * K, ...]; row b * K + k is beam k of example b."""
    shape = ops.shape(x)
    return ops.reshape(x, (shape[0] * shape[1],) + tuple(shape[2:]))


def unflatten_beams(x, batch, beams):
    """[B * K, ...] -> [B, K, ...], the inverse of `flatten_beams`."""
    return ops.reshape(x, (batch, beams) + tuple(ops.shape(x)[1:]))


def repeat_beams(x, beams):
    """[B, ...] -> [B, K, ...]: each example's state copied to its K beams."""
    return ops.repeat(ops.expand_dims(x, 1), beams, axis=1)
