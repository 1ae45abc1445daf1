"""Serving for sentence embeddings: raw strings in, sentence vectors out.

`export_embedding(handle, output)` writes a TF Serving version of a
`SentenceEncoder` (a sentence-transformers folder keeps its pooling,
normalisation and `max_seq_length`) with the same layout, versioning,
warm-up records and checks as every fine-tuned export
(`kerasbert.serving.exporter.export_model`):

    OUTPUT/<version>/saved_model.pb, variables/, assets/vocab.txt
    OUTPUT/<version>/assets.extra/tf_serving_warmup_requests, ops.json,
                                  export.json (task_type "embedding",
                                  pooling, normalize, dimension)

`serving_default`: `text` string [B] -> `embedding` float32 [B, D].
`serve_token_ids`: the three int32 [B, T] inputs -> `embedding`.
"""


from kerasbert.sources.source import handle_label
from kerasbert.serving import exporter
from kerasbert.preprocessing.lengths import default_sequence_length
from kerasbert.serving.task_serving import TaskServing
from kerasbert.tasks.sentence_encoder import load_sentence_encoder

TASK_TYPE = "embedding"


class EmbeddingServing(TaskServing):
    """`SentenceEncoder` on raw text.

    Outputs of `serving_default` (input `text`, string [B]):
        `embedding` float32 [B, D]: the pooled (and, if the model says so,
        L2-normalised) sentence vectors. The tokenizer's packing and the
        truncation to `sequence_length` happen in the graph.

    Args:
        model: a `kerasbert.tasks.SentenceEncoder`.
        tokenizer, sequence_length, options: as `TaskServing`.
    """

    def __init__(self, model, tokenizer, sequence_length, options=None, name=None):
        super().__init__(model, tokenizer, sequence_length, options=options, name=name)

    @classmethod
    def for_run(cls, model, tokenizer, sequence_length, config):
        return cls(model, tokenizer, sequence_length, options=config.get("graph"))

    def serve(self, inputs):
        # The pooled vector of a row does not depend on how far it is
        # padded, so trimming to the batch's longest row is exact.
        return {"embedding": self.run_model(self.encode_batch(inputs["text"]))}

    def model_outputs(self, features):
        return {"embedding": super().model_outputs(features)["logits"]}

    def export_info(self):
        return {"pooling": list(self.model.pooling), "normalize": self.model.normalize,
                "dimension": int(self.model.output_dim)}


def export_embedding(handle, output, version=None, sequence_length=None, overwrite=False,
                     model_name=None, graph=None, pooling=None, normalize=None, vocab=None,
                     lower_case=None, tokenizer_switches=None):
    """Exports the sentence encoder a handle stands for to TF Serving.

    Args:
        handle: a sentence-transformers folder, or any handle
            `SentenceEncoder.from_preset` takes (then `pooling` and
            `normalize` decide; default mean, not normalised).
        output: the model's base directory (`export/NAME`).
        version, overwrite, model_name, graph: as `exporter.export_model`.
        sequence_length: packed length in the graph; default the folder's
            `max_seq_length`, else the text tasks' default (at most the
            backbone's positions).
        pooling, normalize: replace the folder's (None: keep them).
        vocab, lower_case: the tokenizer (`load_sentence_tokenizer`);
        tokenizer_switches: {switch: bool} over the source's settings
            (`kerasbert.text.tokenizer_loading.SWITCHES`).

    Returns:
        dict: path, version, task_type, signatures, custom_ops.
    """
    exporter._version_dir(output, version, overwrite)  # before loading anything
    model, tokenizer = load_sentence_encoder(handle, pooling, normalize, vocab, lower_case,
                                             **(tokenizer_switches or {}))
    sequence_length = int(sequence_length or model.sequence_length or default_sequence_length())
    module = EmbeddingServing(model, tokenizer, sequence_length, options=graph)
    return exporter.export_model(
        model, tokenizer, TASK_TYPE, output, sequence_length=sequence_length, version=version,
        overwrite=overwrite, model_name=model_name, task=TASK_TYPE,
        source={"handle": handle_label(handle)}, graph=graph, module=module)
