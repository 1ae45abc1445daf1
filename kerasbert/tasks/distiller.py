"""Knowledge distillation of a masked-LM teacher into a smaller student
(DistilBERT, Sanh et al., 2019)."""

import keras
import numpy as np
from keras import ops

from kerasbert.convert.bert_weights import get_block_weights
from kerasbert.convert.bert_weights import set_block_weights
from kerasbert.tasks.pretraining_task import PretrainingTask
from kerasbert.tasks.task import backbone_inputs
from kerasbert.kernels import token_cross_entropy

_EPSILON = 1e-5
DEFAULT_WEIGHTS = (5.0, 2.0, 1.0)


def _check_pretrainer(model, role):
    if not (hasattr(model, "backbone") and hasattr(model, "masked_lm_head")):
        raise TypeError(
            f"The {role} must be a model with a masked-LM head, such as "
            f"kerasbert.tasks.BertPretrainer(backbone, objectives=('mlm',)); "
            f"got {type(model).__name__}."
        )


def default_layer_map(num_student_layers, num_teacher_layers):
    """Teacher layer of each student layer: every other one, 0, 2, 4, ...

    This is the paper's "one layer out of two". (Hugging Face's
    extraction script for the released DistilBERT took 0, 2, 4, 7, 9, 11
    of BERT-Base's 12; pass that as `layer_map` to reproduce it.)
    """
    layer_map = [2 * i for i in range(num_student_layers)]
    if layer_map and layer_map[-1] >= num_teacher_layers:
        raise ValueError(
            f"Every other layer of a {num_teacher_layers}-layer teacher gives "
            f"at most {(num_teacher_layers + 1) // 2} layers; the student has "
            f"{num_student_layers}. Pass layer_map= to choose teacher layers."
        )
    return layer_map


def _copy_embeddings(s_emb, t_emb):
    """The teacher's token table, positions [P, H] (with its segment-0 row
    folded in when the student has no segment table), segment rows and
    embedding LayerNorm into the student's embeddings layer."""
    s_emb.token_embedding.embeddings.assign(t_emb.token_embedding.embeddings)
    positions = np.array(t_emb.position_embedding.position_embeddings.numpy())
    if t_emb.segment_embedding is not None and s_emb.segment_embedding is None:
        positions = positions + t_emb.segment_embedding.embeddings.numpy()[0]
    elif t_emb.segment_embedding is not None:
        s_seg = s_emb.segment_embedding.embeddings
        rows = min(s_seg.shape[0], t_emb.segment_embedding.embeddings.shape[0])
        s_seg.assign(
            np.concatenate(
                [t_emb.segment_embedding.embeddings.numpy()[:rows], s_seg.numpy()[rows:]]
            )
        )
    s_pos = s_emb.position_embedding.position_embeddings
    rows = min(s_pos.shape[0], positions.shape[0])
    # Extra student positions (if any) keep their random initialisation.
    s_pos.assign(np.concatenate([positions[:rows], s_pos.numpy()[rows:]]))
    s_emb.layer_norm.gamma.assign(t_emb.layer_norm.gamma)
    s_emb.layer_norm.beta.assign(t_emb.layer_norm.beta)


def init_student_from_teacher(student, teacher, layer_map=None):
    """Copies a teacher's weights into a shallower student of equal width.

    Embeddings (token, position, LayerNorm) are copied; student layer i
    gets teacher layer `layer_map[i]` (default 0, 2, 4, ...: see
    `default_layer_map`). When the teacher has a segment table and the
    student none (BERT -> DistilBERT), the teacher's segment-0 row, which
    BERT adds to every single-segment token, is folded into the student's
    position table, so the student's embedding output equals the
    teacher's for segment-0 tokens. With pretrainers (both having
    `masked_lm_head`) the masked-LM head is copied too (the output decoder
    is tied to the token table, already copied).

    Args:
        student, teacher: backbones, or pretrainers (models with `.backbone`
            and `.masked_lm_head`). Blocks must be TransformerEncoderBlocks.
        layer_map: list of teacher layer indices, one per student layer.

    Returns:
        the layer map used (list of int).
    """
    s_bb = getattr(student, "backbone", student)
    t_bb = getattr(teacher, "backbone", teacher)
    for key in ("hidden_dim", "vocabulary_size"):
        if getattr(s_bb, key) != getattr(t_bb, key):
            raise ValueError(
                f"The student's {key} ({getattr(s_bb, key)}) differs from the "
                f"teacher's ({getattr(t_bb, key)}); distillation needs equal "
                "widths (cosine loss on hidden states, copied layers) and one "
                "vocabulary."
            )
    if t_bb.embeddings.projection is not None or s_bb.embeddings.projection is not None:
        raise ValueError("Factorised embeddings (ALBERT) cannot be copied layer-wise.")
    s_layers, t_layers = s_bb.transformer_layers, t_bb.transformer_layers
    if layer_map is None:
        layer_map = default_layer_map(len(s_layers), len(t_layers))
    layer_map = [int(i) for i in layer_map]
    if len(layer_map) != len(s_layers) or not all(
        0 <= i < len(t_layers) for i in layer_map
    ):
        raise ValueError(
            f"layer_map {layer_map} must give one teacher layer in "
            f"[0, {len(t_layers)}) for each of the student's {len(s_layers)} "
            "layers."
        )

    _copy_embeddings(s_bb.embeddings, t_bb.embeddings)
    for i, t_index in enumerate(layer_map):
        set_block_weights(
            s_layers[i],
            get_block_weights(t_layers[t_index]),
            f"student layer {i} (teacher layer {t_index})",
        )

    s_head = getattr(student, "masked_lm_head", None)
    t_head = getattr(teacher, "masked_lm_head", None)
    if s_head is not None and t_head is not None:
        for name in ("dense", "layer_norm"):
            for s_var, t_var in zip(
                getattr(s_head, name).weights, getattr(t_head, name).weights
            ):
                s_var.assign(t_var)
        s_head.output_bias.assign(t_head.output_bias)
    return layer_map


@keras.saving.register_keras_serializable(package="kerasbert")
class Distiller(PretrainingTask):
    """Trains a student masked LM to imitate a frozen teacher (DistilBERT).

    Loss = alpha_ce * L_ce + alpha_mlm * L_mlm + alpha_cos * L_cos, with
    `weights=(alpha_ce, alpha_mlm, alpha_cos)` (DistilBERT: 5, 2, 1):

    - L_ce, the soft-target loss: over the masked positions (weighted by
      `masked_lm_weights`), the cross-entropy between the teacher's and the
      student's token distributions at temperature T, minus the teacher's
      entropy (a constant), i.e. KL(softmax(t / T) || softmax(s / T)),
      times T^2 so its gradients keep their size as T changes (Hinton et
      al., 2015; the original's `KLDivLoss * T**2`). 0 means the student
      matches the teacher.
    - L_mlm: the student's own masked-LM cross-entropy on `masked_lm_ids`.
    - L_cos: mean over real tokens (`input_mask`) of 1 - cos(student,
      teacher) between the last hidden states (DistilBERT's cosine loss).

    The teacher runs in inference mode (no dropout) and is frozen (not
    trainable; its outputs are cut from the gradient). Under a
    `tf.distribute` strategy the denominators (mask weights, real tokens)
    are summed over replicas, as in `BertPretrainer`, so the gradient is
    that of the global batch.

    Train with `model.fit(kerasbert.data.pretraining_dataset(...))`
    (labels come from the feature dict; `next_sentence_labels` is ignored).

    Args:
        teacher: a pretrainer with a masked-LM head (`BertPretrainer`);
            its `backbone` and `masked_lm_head` are used.
        student: a `BertPretrainer` (e.g. over a `DistilBertBackbone`) of
            the same hidden width and vocabulary. Initialise it with
            `init_student_from_teacher` first (not done here, so a reloaded
            or resumed student keeps its weights).
        temperature: float > 0 (2.0).
        weights: (alpha_ce, alpha_mlm, alpha_cos), each >= 0.

    Call args:
        inputs: feature dict with `input_word_ids`, `input_mask`,
            (`input_type_ids`), `masked_lm_positions` [B, P].

    Returns:
        dict: `mlm_logits` / `teacher_mlm_logits` float32 [B, P, V],
        `sequence_output` / `teacher_sequence_output` [B, T, H].

    Metrics: `loss`, `ce_loss` (L_ce), `mlm_loss`, `cos_loss`,
    `mlm_accuracy` (student vs labels) and `teacher_agreement` (share of
    masked positions where the student's top-1 token is the teacher's).

    Example:

    >>> import numpy as np
    >>> from kerasbert.models import BertBackbone, DistilBertBackbone
    >>> from kerasbert.tasks import BertPretrainer, Distiller
    >>> size = dict(vocabulary_size=10, num_heads=2, hidden_dim=8, intermediate_dim=16,
    ...             max_sequence_length=16)
    >>> teacher = BertPretrainer(BertBackbone(num_layers=2, **size), objectives=("mlm",))
    >>> student = BertPretrainer(DistilBertBackbone(num_layers=1, **size), objectives=("mlm",))
    >>> model = Distiller(teacher, student, temperature=2.0)
    >>> outputs = model({"input_word_ids": np.array([[2, 5, 4, 7, 3]]),           # [B, T]
    ...                  "input_mask": np.ones((1, 5), "int32"),
    ...                  "masked_lm_positions": np.array([[2]])})                 # [B, P]
    >>> tuple(outputs["mlm_logits"].shape), tuple(outputs["teacher_mlm_logits"].shape)
    ((1, 1, 10), (1, 1, 10))
    """

    #: Learning rate of `compile(optimizer="auto")` (DistilBERT's).
    default_learning_rate = 5e-4

    def __init__(self, teacher, student, temperature=2.0, weights=DEFAULT_WEIGHTS,
                 dtype=None, **kwargs):
        _check_pretrainer(teacher, "teacher")
        _check_pretrainer(student, "student")
        if teacher is student:
            raise ValueError("The teacher and the student must be different models.")
        t_bb, s_bb = teacher.backbone, student.backbone
        if s_bb.hidden_dim != t_bb.hidden_dim:
            raise ValueError(
                f"The student's hidden_dim ({s_bb.hidden_dim}) differs from the "
                f"teacher's ({t_bb.hidden_dim}): the cosine loss compares their "
                "hidden states. Build the student with "
                f"hidden_dim={t_bb.hidden_dim}."
            )
        if s_bb.vocabulary_size != t_bb.vocabulary_size:
            raise ValueError(
                f"The student's vocabulary_size ({s_bb.vocabulary_size}) differs "
                f"from the teacher's ({t_bb.vocabulary_size})."
            )
        temperature = float(temperature)
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}.")
        weights = tuple(float(w) for w in weights)
        if len(weights) != 3 or min(weights) < 0 or max(weights) == 0:
            raise ValueError(
                "weights must be (alpha_ce, alpha_mlm, alpha_cos), each >= 0 "
                f"and not all 0; got {weights}."
            )
        # The model being trained is the student: its backbone is this
        # task's `backbone` (and sets the dtype policy).
        super().__init__(s_bb, dtype=dtype, **kwargs)
        teacher.trainable = False
        self.teacher = teacher
        self.student = student
        self.temperature = temperature
        self.distillation_weights = weights

        self.ce_loss_tracker = keras.metrics.Mean(name="ce_loss")
        self.mlm_loss_tracker = keras.metrics.Mean(name="mlm_loss")
        self.cos_loss_tracker = keras.metrics.Mean(name="cos_loss")
        self.mlm_accuracy = keras.metrics.Mean(name="mlm_accuracy")
        self.teacher_agreement = keras.metrics.Mean(name="teacher_agreement")
        self.built = True

    def build(self, input_shape=None):
        self.built = True

    # --- forward ----------------------------------------------------------

    @staticmethod
    def _run(pretrainer, features, positions, training):
        out = pretrainer.backbone(features, training=training)
        sequence = out["sequence_output"]
        return pretrainer.masked_lm_head(sequence, positions), sequence

    def call(self, inputs, training=False):
        features = backbone_inputs(inputs)
        positions = inputs["masked_lm_positions"]
        t_logits, t_seq = self._run(self.teacher, features, positions, False)
        s_logits, s_seq = self._run(self.student, features, positions, training)
        return {
            "mlm_logits": s_logits,
            "teacher_mlm_logits": ops.stop_gradient(t_logits),
            "sequence_output": s_seq,
            "teacher_sequence_output": ops.stop_gradient(t_seq),
        }

    # --- losses -----------------------------------------------------------

    def _elementwise(self, features, outputs):
        """Per-position [B, P] and per-token [B, T] float32 terms."""
        T = self.temperature
        s_logits = ops.cast(outputs["mlm_logits"], "float32")
        t_logits = ops.cast(outputs["teacher_mlm_logits"], "float32")
        ids = ops.cast(features["masked_lm_ids"], "int32")
        s_log_p = ops.log_softmax(s_logits / T, axis=-1)
        t_log_p = ops.log_softmax(t_logits / T, axis=-1)
        kl = ops.sum(ops.exp(t_log_p) * (t_log_p - s_log_p), axis=-1) * (T * T)
        mlm, _ = token_cross_entropy(s_logits, ids)
        s_top = ops.cast(ops.argmax(s_logits, axis=-1), "int32")
        t_top = ops.cast(ops.argmax(t_logits, axis=-1), "int32")

        s_seq = ops.cast(outputs["sequence_output"], "float32")
        t_seq = ops.cast(outputs["teacher_sequence_output"], "float32")
        dot = ops.sum(s_seq * t_seq, axis=-1)
        norms = ops.sqrt(ops.sum(s_seq * s_seq, axis=-1) * ops.sum(t_seq * t_seq, axis=-1))
        cos = 1.0 - dot / ops.maximum(norms, 1e-8)
        return {
            "ce": kl,
            "mlm": mlm,
            "hits": ops.cast(ops.equal(s_top, ids), "float32"),
            "agree": ops.cast(ops.equal(s_top, t_top), "float32"),
            "weights": ops.cast(features["masked_lm_weights"], "float32"),
            "cos": cos,
            "mask": ops.cast(features["input_mask"], "float32"),
        }

    def _sums(self, e):
        w, m = e["weights"], e["mask"]
        return {"ce_sum": ops.sum(w * e["ce"]), "mlm_sum": ops.sum(w * e["mlm"]),
                "cos_sum": ops.sum(m * e["cos"])}

    @staticmethod
    def loss_normalizers(features):
        """{"weight_sum": masked positions, "token_sum": real tokens}."""
        return {"weight_sum": ops.sum(ops.cast(features["masked_lm_weights"], "float32")),
                "token_sum": ops.sum(ops.cast(features["input_mask"], "float32"))}

    def combine_loss_terms(self, terms, normalizers):
        """The weighted soft-target, hard-target and cosine losses (class
        doc), each averaged over its own positions of the global batch."""
        weight_total = ops.maximum(normalizers["weight_sum"], _EPSILON)
        a_ce, a_mlm, a_cos = self.distillation_weights
        return (a_ce * terms["ce_sum"] / weight_total + a_mlm * terms["mlm_sum"] / weight_total
                + a_cos * terms["cos_sum"] / ops.maximum(normalizers["token_sum"], 1.0))

    def _extra_losses(self):
        # The frozen teacher's regularization losses are not the student's.
        return self.student.losses

    def _update_metrics(self, e):
        w, m = e["weights"], e["mask"]
        self.ce_loss_tracker.update_state(e["ce"], sample_weight=w)
        self.mlm_loss_tracker.update_state(e["mlm"], sample_weight=w)
        self.cos_loss_tracker.update_state(e["cos"], sample_weight=m)
        self.mlm_accuracy.update_state(e["hits"], sample_weight=w)
        self.teacher_agreement.update_state(e["agree"], sample_weight=w)

    # --- config -------------------------------------------------------------

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "teacher": keras.saving.serialize_keras_object(self.teacher),
            "student": keras.saving.serialize_keras_object(self.student),
            "temperature": self.temperature,
            "weights": list(self.distillation_weights),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in ("teacher", "student"):
            if isinstance(config.get(key), dict):
                config[key] = keras.saving.deserialize_keras_object(config[key])
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)
