"""Serving for sequence classification, sentence pairs and regression."""

import tensorflow as tf

from kerasbert.data.finetuning.task_formats import task_format
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
    def for_run(cls, model, tokenizer, sequence_length, config):
        pair = task_format(config["task_type"]).text_pair
        return cls(model, tokenizer, sequence_length, config.get("label_names"), pair=pair,
                   options=config.get("graph"))

    def __init__(self, model, tokenizer, sequence_length, label_names=None, pair=False,
                 options=None, name=None):
        super().__init__(model, tokenizer, sequence_length, label_names, options=options,
                         name=name)
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
