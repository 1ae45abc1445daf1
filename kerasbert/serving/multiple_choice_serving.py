"""Serving for multiple choice (SWAG and the like)."""

import tensorflow as tf

from kerasbert.serving.task_serving import EDGE_TEXTS
from kerasbert.serving.task_serving import TaskServing
from kerasbert.serving.task_serving import clean_text
from kerasbert.serving.task_serving import string_spec


class MultipleChoiceServing(TaskServing):
    """`MultipleChoice` on raw text.

    Inputs of `serving_default`: `context` string [B] and `choices` string
    [B, num_choices]; each choice is packed `[CLS] context [SEP] choice
    [SEP]` as in fine-tuning (put any question stem in front of each
    choice, as the SWAG converter does).

    Outputs: `probabilities` float32 [B, num_choices] (softmax over the
    choices), `choice` int32 [B] (the most probable), `choice_text`
    string [B].
    """

    raw_inputs = ("context", "choices")

    @classmethod
    def for_preprocessor(cls, model, preprocessor, label_names=None, options=None):
        return cls(model, preprocessor.tokenizer, preprocessor.sequence_length, options=options,
                   packer=preprocessor.packer)

    def __init__(self, model, tokenizer, sequence_length, options=None, name=None, packer=None):
        super().__init__(model, tokenizer, sequence_length, options=options, name=name,
                         packer=packer)
        self.num_choices = int(model.num_choices)

    def input_specs(self):
        return [string_spec("context"), string_spec("choices", (None, self.num_choices))]

    def token_ids_shape(self):
        return (None, self.num_choices, self.sequence_length)

    def serve(self, inputs):
        context, choices = inputs["context"], inputs["choices"]
        # Every (context, choice) pair as one row: [B * C] strings.
        repeated = tf.reshape(
            tf.repeat(context[:, tf.newaxis], self.num_choices, axis=1), [-1]
        )
        flat = self.encode_batch(repeated, tf.reshape(choices, [-1]))
        features = {
            name: tf.reshape(value, [-1, self.num_choices, self.sequence_length])
            for name, value in flat.items()
        }
        logits = self.run_model(features)
        probabilities = tf.nn.softmax(logits, axis=-1)
        choice = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        return {
            "probabilities": probabilities,
            "choice": choice,
            "choice_text": tf.gather(clean_text(choices), choice, batch_dims=1),
        }

    def warmup_token_ids(self):
        first = self.warmup_requests()[0]
        context = tf.constant(first["context"] * self.num_choices, tf.string)
        flat = self.encode_batch(context, tf.reshape(tf.constant(first["choices"]), [-1]))
        return {name: tf.reshape(value, [1, self.num_choices, -1]).numpy()
                for name, value in flat.items()}

    def warmup_requests(self):
        requests = []
        for text in ("Someone opens the door.",) + EDGE_TEXTS:
            requests.append({
                "context": [text],
                "choices": [[text] + [f"choice {i}" for i in range(1, self.num_choices)]],
            })
        return requests
