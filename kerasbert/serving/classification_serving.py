"""Serving for sequence classification, sentence pairs and regression."""

import tensorflow as tf

from kerasbert.serving.task_serving import TaskServing


class ClassificationServing(TaskServing):
    """`TextClassifier` on raw text: `text` (or `text_a` + `text_b`).

    Outputs of `serving_default`:
        classification / pairs: `probabilities` float32 [B, num_classes],
            `label_id` int32 [B], `label` string [B].
        regression: `score` float32 [B].

    Args:
        model, tokenizer, sequence_length, label_names: as `TaskServing`.
        pair: serve `text_a` + `text_b`, packed `[CLS] a [SEP] b [SEP]`.
    """

    @classmethod
    def for_preprocessor(cls, model, preprocessor, label_names=None, options=None):
        return cls(model, preprocessor.tokenizer, preprocessor.sequence_length,
                   label_names or preprocessor.label_names, pair=preprocessor.format.text_pair,
                   options=options, packer=preprocessor.packer)

    def __init__(self, model, tokenizer, sequence_length, label_names=None, pair=False,
                 options=None, name=None, packer=None):
        super().__init__(model, tokenizer, sequence_length, label_names, options=options,
                         name=name, packer=packer)
        self.pair = bool(pair)
        self.raw_inputs = ("text_a", "text_b") if self.pair else ("text",)
        self.is_regression = model.num_classes == 1

    def serve(self, inputs):
        if self.pair:
            features = self.encode_batch(inputs["text_a"], inputs["text_b"])
        else:
            features = self.encode_batch(inputs["text"])
        outputs = self.run_model(features)
        if self.is_regression:
            return {"score": outputs[:, 0]}
        probabilities = tf.nn.softmax(outputs, axis=-1)
        label_id = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        return {
            "probabilities": probabilities,
            "label_id": label_id,
            "label": self.lookup_labels(label_id),
        }
