"""A GPT model as a text-generation SavedModel: `prompt` string in,
`completion` string out, greedy decoding in the graph.

    serving_default(prompt: string [B], max_new_tokens: int32 scalar)
        -> completion: string [B]   the generated text (prompt not repeated)
           num_tokens: int32 [B]    generated pieces per prompt

The tokenizer (tensorflow-text ops and lookup tables, its files as assets)
and the decoding loop (`CausalLM.generate_ids`: `kerasbert.decoding`'s
`ops.while_loop`, the one `CausalLM.generate` runs) are in the graph, so the
SavedModel loads and runs with `tensorflow` + `import tensorflow_text`
alone.

Decoding: the prompt is encoded as the pretraining data was (start token +
pieces; a prompt too long for the positions keeps its last pieces), then
each step runs the decoder on the right-padded buffer and appends the
argmax token at each unfinished row's end. A row stops at the separator
token (which ends every pretraining sequence; it is not part of the
completion), after `max_new_tokens` tokens, or when it fills the model's
positions. Each step recomputes the whole buffer (no key/value cache), so a
step costs one forward pass over at most `sequence_length` tokens.
"""

import json
import os

import tensorflow as tf

from kerasbert.io_utils import atomic_directory
from kerasbert.serving.exporter import _version_dir
from kerasbert.serving.exporter import describe_source
from kerasbert.serving.exporter import replay_warmup
from kerasbert.serving.op_manifest import write_manifest
from kerasbert.serving.task_serving import clean_text
from kerasbert.serving.task_serving import EDGE_TEXTS
from kerasbert.serving.warmup import write_warmup
from kerasbert.loading.generation import load_generator
from kerasbert.loading.generation import model_ids
from kerasbert.text import tokenizer_files
from kerasbert.text import tokenizer_kind

SIGNATURES = ("serving_default",)


class GenerationServing(tf.Module):
    """`CausalLM` + tokenizer -> greedy text generation in one graph.

    Args:
        model: a `kerasbert.tasks.CausalLM`.
        tokenizer: the tokenizer it was trained with (any family: its
            `cls_id` starts a sequence, `sep_id` ends one).
        sequence_length: the longest buffer (prompt + completion), at most the
            model's positions; default all of them.
    """

    def __init__(self, model, tokenizer, sequence_length=None, name=None):
        super().__init__(name=name)
        self.model = model
        self.tokenizer = tokenizer
        limit = model.backbone.max_sequence_length
        self.sequence_length = int(sequence_length or limit)
        if not 2 <= self.sequence_length <= limit:
            raise ValueError(f"sequence_length must be in [2, {limit}] (the model's positions), "
                             f"got {self.sequence_length}.")
        # A published GPT-1 has no start or end token (`model_ids`): -1 is
        # no token id, so nothing is prepended and nothing ends generation.
        self.vocabulary_size = model.backbone.vocabulary_size
        start, end = model_ids(tokenizer, self.vocabulary_size)
        self.start_id = -1 if start is None else start
        self.end_id = -1 if end is None else end
        self.pad_id = int(tokenizer.pad_id)

    def encode_prompts(self, prompts):
        """string [B] -> (int32 ids [B, (n)] with the start token, lengths
        [B]); at most sequence_length - 1 tokens (the last pieces kept)."""
        pieces = self.tokenizer.tokenize_ids(clean_text(prompts))
        # Ids the model has no embedding for (GPT-1's appended <unk>) are left out.
        pieces = tf.ragged.boolean_mask(pieces, pieces < self.vocabulary_size)
        keep = self.sequence_length - 2
        pieces = pieces[:, -keep:] if keep > 0 else pieces[:, :0]
        if self.start_id < 0:
            return tf.cast(pieces, tf.int32), tf.cast(pieces.row_lengths(), tf.int32)
        starts = tf.fill([pieces.nrows(), 1], tf.constant(self.start_id, pieces.dtype))
        ids = tf.concat([tf.RaggedTensor.from_tensor(starts), pieces], axis=1)
        return tf.cast(ids, tf.int32), tf.cast(ids.row_lengths(), tf.int32)

    def generate(self, prompts, max_new_tokens):
        """Greedy decoding (`CausalLM.generate_ids`, the loop of
        `kerasbert.decoding`); returns {"completion", "num_tokens"}."""
        prompts = tf.reshape(prompts, [-1])
        max_new_tokens = tf.maximum(tf.cast(tf.reshape(max_new_tokens, []), tf.int32), 0)
        ragged, prompt_lengths = self.encode_prompts(prompts)
        longest = tf.reduce_max(tf.concat([prompt_lengths, [1]], 0))
        width = tf.minimum(self.sequence_length, longest + tf.maximum(max_new_tokens, 1))
        shape = tf.stack([ragged.nrows(), tf.cast(width, tf.int64)])
        ids = ragged.to_tensor(default_value=self.pad_id, shape=shape)
        new, num_tokens = self.model.generate_ids(ids, prompt_lengths, max_new_tokens,
                                                  self.end_id)
        new = tf.RaggedTensor.from_tensor(new, lengths=num_tokens)
        special = tf.logical_or(tf.equal(new, self.start_id), tf.equal(new, self.pad_id))
        text = self.tokenizer.detokenize(tf.ragged.boolean_mask(new, tf.logical_not(special)))
        return {"completion": text, "num_tokens": num_tokens}

    def input_specs(self):
        return [tf.TensorSpec([None], tf.string, name="prompt"),
                tf.TensorSpec([], tf.int32, name="max_new_tokens")]

    def signatures(self):
        def serving_default(prompt, max_new_tokens):
            return self.generate(prompt, max_new_tokens)

        return {"serving_default": tf.function(
            serving_default, input_signature=self.input_specs(),
            autograph=False).get_concrete_function()}

    def warmup_requests(self):
        """(signature, inputs) pairs: ordinary prompts, zero new tokens and
        the edge-case texts every served model must survive."""
        requests = [("serving_default", {"prompt": ["The cat", "A longer prompt here"],
                                         "max_new_tokens": 4}),
                    ("serving_default", {"prompt": ["nothing to add"], "max_new_tokens": 0})]
        for text in EDGE_TEXTS:
            requests.append(("serving_default", {"prompt": [text], "max_new_tokens": 2}))
        return requests


def export_generation(model, tokenizer, output, version=None, sequence_length=None,
                      overwrite=False, model_name=None, source=None):
    """Writes OUTPUT/<version>/ (as `kerasbert.serving.exporter.export_model`:
    temporary name, warm-up replayed, then renamed) for a `CausalLM`.

    Returns:
        dict: path, version, task_type ("generation"), signatures,
        custom_ops.
    """

    version, target = _version_dir(output, version, overwrite)
    module = GenerationServing(model, tokenizer, sequence_length)
    model_name = model_name or os.path.basename(os.path.normpath(output))
    requests = module.warmup_requests()
    with atomic_directory(target, overwrite=overwrite) as tmp:
        tf.saved_model.save(module, tmp, signatures=module.signatures())
        write_warmup(tmp, model_name, requests)
        manifest = write_manifest(tmp)
        info = {
            "task_type": "generation", "decoding": "greedy", "seq_length": module.sequence_length,
            "start_id": module.start_id, "end_id": module.end_id,
            "tokenizer": {"type": tokenizer_kind(tokenizer),
                          "assets": [os.path.basename(p) for p in tokenizer_files(tokenizer)]},
            "inputs": [spec.name for spec in module.input_specs()],
            "outputs": ["completion", "num_tokens"],
            "signatures": list(SIGNATURES), "source": source,
        }
        with open(os.path.join(tmp, "assets.extra", "export.json"), "w", encoding="utf-8") as f:
            json.dump(info, f, indent=2)
        replay_warmup(tmp, requests)
    return {"path": target, "version": version, "task_type": "generation",
            "signatures": list(SIGNATURES), "custom_ops": manifest["custom_ops"]}


def export_generation_run(model_dir, output, version=None, sequence_length=None,
                          overwrite=False, model_name=None, vocab=None):
    """`kerasbert export` of a GPT pretraining run: its CausalLM and the
    tokenizer its config.json names (or `vocab`)."""

    _version_dir(output, version, overwrite)  # fail before loading anything
    model, tokenizer, loaded = load_generator(model_dir, vocab)
    return export_generation(model, tokenizer, output, version=version,
                             sequence_length=sequence_length, overwrite=overwrite,
                             model_name=model_name, source=describe_source(loaded))
