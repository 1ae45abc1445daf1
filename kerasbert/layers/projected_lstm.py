"""One direction of one layer of ELMo's biLM: an LSTM whose output is
projected to a narrower width, with the cell and the output clipped."""

import keras
from keras import ops


def reverse_padded(x, lengths):
    """Reverses each row's first `lengths[b]` steps and leaves its padding in
    place (TensorFlow's `reverse_sequence` in keras ops; its own inverse).

    Args:
        x: [B, T, ...].
        lengths: int [B], the real steps of each row (right padding).
    """
    steps = ops.cumsum(ops.ones_like(x[:, :, 0], dtype="int32"), axis=1) - 1  # [B, T]
    lengths = ops.expand_dims(ops.cast(lengths, "int32"), 1)
    index = ops.where(steps < lengths, lengths - 1 - steps, steps)
    while len(index.shape) < len(x.shape):
        index = ops.expand_dims(index, -1)
    return ops.take_along_axis(x, ops.broadcast_to(index, ops.shape(x)), axis=1)


@keras.saving.register_keras_serializable(package="kerasbert")
class ProjectedLSTM(keras.layers.Layer):
    """An LSTM with a projected output, in the layout of TensorFlow 1's
    `LSTMCell(units, num_proj=projection_dim, cell_clip, proj_clip)`, the cell
    of the published biLM:

        [i, j, f, o] = [x_t, h_{t-1}] kernel + bias        (4 x units)
        c_t = sigmoid(f + forget_bias) c_{t-1} + sigmoid(i) tanh(j),
              clipped to [-cell_clip, cell_clip]
        h_t = (sigmoid(o) tanh(c_t)) projection,
              clipped to [-projection_clip, projection_clip]

    The forget bias is added at run time and is not part of `bias` (as in
    the published weight files). Steps where the mask is 0 keep the state
    and output zeros; rows must be right-padded. Each call starts from a
    zero state (the published biLM carried its state across batches).

    Args:
        units: int. Cell width D.
        projection_dim: int. Output width P.
        cell_clip, projection_clip: float or None (no clipping).
        forget_bias: float.
        go_backwards: run each row from its last real step to its first;
            the outputs are put back in the input's order.

    Call args:
        inputs: float [B, T, F].
        padding_mask: int or bool [B, T], 1 at real steps.

    Returns:
        float [B, T, P], zeros at masked steps.

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import ProjectedLSTM
    >>> lstm = ProjectedLSTM(units=16, projection_dim=4)
    >>> inputs = np.ones((2, 5, 8), "float32")                # [B, T, F]
    >>> mask = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])   # [B, T]
    >>> outputs = lstm(inputs, mask)                          # [B, T, P]
    >>> tuple(outputs.shape), float(np.abs(outputs[1, 2:]).max())   # zeros past the mask
    ((2, 5, 4), 0.0)
    """

    def __init__(self, units, projection_dim, cell_clip=3.0, projection_clip=3.0,
                 forget_bias=1.0, go_backwards=False, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.projection_dim = projection_dim
        self.cell_clip = cell_clip
        self.projection_clip = projection_clip
        self.forget_bias = forget_bias
        self.go_backwards = go_backwards

    def build(self, inputs_shape, padding_mask_shape=None):
        features = inputs_shape[-1]
        self.kernel = self.add_weight(
            name="kernel", shape=(features + self.projection_dim, 4 * self.units),
            initializer="glorot_uniform")
        self.bias = self.add_weight(name="bias", shape=(4 * self.units,), initializer="zeros")
        self.projection = self.add_weight(
            name="projection", shape=(self.units, self.projection_dim),
            initializer="glorot_uniform")
        self.built = True

    def call(self, inputs, padding_mask):
        mask = ops.cast(padding_mask, "int32")
        lengths = ops.sum(mask, axis=1)
        x = reverse_padded(inputs, lengths) if self.go_backwards else inputs
        features = ops.shape(x)[-1]
        kernel = ops.convert_to_tensor(self.kernel)
        # The input half of the gates for every step at once; only the
        # recurrent half runs step by step.
        gates_x = ops.matmul(x, kernel[:features]) + self.bias  # [B, T, 4D]
        recurrent = kernel[features:]
        projection = ops.convert_to_tensor(self.projection)
        keep = ops.cast(ops.expand_dims(mask, -1), gates_x.dtype)  # [B, T, 1]
        # One time-major tensor [T, B, 4D + 1] of gates and mask (Keras'
        # TensorFlow scan cannot take several inputs of unknown length).
        steps = ops.transpose(ops.concatenate([gates_x, keep], axis=-1), (1, 0, 2))
        # Keras' scan wants each step's output shaped like its carry, so the
        # carry is [c; h] (D + P) and each step emits [c; masked h].
        units = self.units
        initial = ops.zeros_like(gates_x[:, 0, :units + self.projection_dim])

        def step(state, inputs_t):
            c, h = state[:, :units], state[:, units:]
            gates, kept = inputs_t[:, :-1], inputs_t[:, -1:]
            gates = gates + ops.matmul(h, recurrent)
            i, j, f, o = ops.split(gates, 4, axis=-1)
            new_c = ops.sigmoid(f + self.forget_bias) * c + ops.sigmoid(i) * ops.tanh(j)
            if self.cell_clip is not None:
                new_c = ops.clip(new_c, -self.cell_clip, self.cell_clip)
            new_h = ops.matmul(ops.sigmoid(o) * ops.tanh(new_c), projection)
            if self.projection_clip is not None:
                new_h = ops.clip(new_h, -self.projection_clip, self.projection_clip)
            c = kept * new_c + (1 - kept) * c
            h = kept * new_h + (1 - kept) * h
            return ops.concatenate([c, h], -1), ops.concatenate([c, new_h * kept], -1)

        _, outputs = ops.scan(step, initial, steps)
        outputs = outputs[:, :, units:]
        outputs = ops.transpose(outputs, (1, 0, 2))
        return reverse_padded(outputs, lengths) if self.go_backwards else outputs

    def compute_output_shape(self, inputs_shape, padding_mask_shape=None):
        return (*inputs_shape[:-1], self.projection_dim)

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, projection_dim=self.projection_dim,
                      cell_clip=self.cell_clip, projection_clip=self.projection_clip,
                      forget_bias=self.forget_bias, go_backwards=self.go_backwards)
        return config
