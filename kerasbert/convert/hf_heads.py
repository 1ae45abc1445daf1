"""The pretraining heads of a Hugging Face checkpoint -> a pretrainer's.

Masked-LM checkpoints (`BertForPreTraining`, `RobertaForMaskedLM`,
`AlbertForPreTraining`, `DistilBertForMaskedLM`, `BigBirdForPreTraining`,
and ELECTRA's generator, `ElectraForMaskedLM`) carry the masked-LM head: a
transform Linear (to the embedding width) + LayerNorm, a decoder tied to
the token embedding and an output bias (ModernBERT's `ModernBertForMaskedLM`:
the same without the transform's and LayerNorm's biases, the GELU exact);
BERT, BigBird and ALBERT add the
sentence head (NSP / SOP, [2, H]). `HEADS` names them per `model_type`;
`pretraining_heads_from_hf` reads them (None when the checkpoint has no
masked-LM head, e.g. a bare encoder), `set_pretraining_heads` writes them
into a `BertPretrainer` built on the same backbone.
"""

import os

import numpy as np

from kerasbert.convert.bert_weights import _assign
from kerasbert.convert.safetensors_files import CheckpointError
from kerasbert.convert.safetensors_files import read_checkpoint_directory
from kerasbert.sources.source import read_json_file

_BERT = ("cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
         "cls.predictions.bias", "cls.seq_relationship")

#: model_type -> (transform Linear, LayerNorm, output bias, sentence Linear or None)
HEADS = {
    "bert": _BERT,
    "big_bird": _BERT,
    "roberta": ("lm_head.dense", "lm_head.layer_norm", "lm_head.bias", None),
    "albert": ("predictions.dense", "predictions.LayerNorm", "predictions.bias",
               "sop_classifier.classifier"),
    "distilbert": ("vocab_transform", "vocab_layer_norm", "vocab_projector.bias", None),
    # The generator (electra-*-generator); a discriminator checkpoint has none.
    "electra": ("generator_predictions.dense", "generator_predictions.LayerNorm",
                "generator_lm_head.bias", None),
    "modernbert": ("head.dense", "head.norm", "decoder.bias", None),
}

#: config.json settings of a head that `MaskedLMHead` does not compute, per
#: model_type: key -> the value it must have (refused naming the key).
HEAD_SETTINGS = {"modernbert": {"classifier_bias": False, "classifier_activation": "gelu",
                                "decoder_bias": True, "norm_bias": False,
                                "tie_word_embeddings": True}}


def _layer_norm(tensors, module):
    """(gamma, beta) of a LayerNorm; beta None for one without bias."""
    for gamma, beta in (("weight", "bias"), ("gamma", "beta")):
        if f"{module}.{gamma}" in tensors:
            return tensors[f"{module}.{gamma}"], tensors.get(f"{module}.{beta}")
    raise CheckpointError(f"no {module}.weight in the checkpoint")


def check_head_settings(config, model_type, source):
    """Refuses a head setting of config.json that `MaskedLMHead` does not
    compute (`HEAD_SETTINGS`), naming the key."""
    for key, value in HEAD_SETTINGS.get(model_type, {}).items():
        if (config or {}).get(key, value) != value:
            raise CheckpointError(f"{source}: {key}={config[key]!r}: the masked-LM head here "
                                  f"computes {key}={value!r} only.")


def pretraining_heads_from_hf(directory, model_type):
    """{"transform_kernel" [H, E], "transform_bias", "ln_gamma", "ln_beta",
    "output_bias" [V], and "sentence_kernel" [H, 2], "sentence_bias" when
    the checkpoint has them}, or None without a masked-LM head. A head
    without biases (ModernBERT) has None for transform_bias and ln_beta."""
    layout = HEADS.get(model_type)
    if layout is None:
        return None
    transform, norm, bias, sentence = layout
    if model_type in HEAD_SETTINGS:
        config = read_json_file(os.path.join(directory, "config.json"))
        check_head_settings(config, model_type, os.path.join(directory, "config.json"))
    tensors = read_checkpoint_directory(directory)
    if f"{transform}.weight" not in tensors:
        return None
    heads = {"transform_kernel": tensors[f"{transform}.weight"].T,
             "transform_bias": tensors.get(f"{transform}.bias"),
             "output_bias": tensors[bias]}
    try:
        heads["ln_gamma"], heads["ln_beta"] = _layer_norm(tensors, norm)
    except CheckpointError as err:
        raise CheckpointError(f"{directory}: {err}") from None
    if sentence is not None and f"{sentence}.weight" in tensors:
        heads["sentence_kernel"] = tensors[f"{sentence}.weight"].T
        heads["sentence_bias"] = tensors[f"{sentence}.bias"]
    return heads


def set_pretraining_heads(pretrainer, heads, source):
    """Writes `heads` into `pretrainer`'s masked-LM head (and its sentence
    head when both have one); returns the names of the heads written."""
    mlm = pretrainer.masked_lm_head
    try:
        _assign(mlm.dense.kernel, heads["transform_kernel"], "masked-LM transform kernel")
        if (heads["transform_bias"] is None) == mlm.dense.use_bias or (
                heads["ln_beta"] is None) == mlm.layer_norm.center:
            raise ValueError("the checkpoint's masked-LM head and this one differ in having "
                             "biases (transform dense, LayerNorm)")
        _assign(mlm.layer_norm.gamma, heads["ln_gamma"], "masked-LM LayerNorm gamma")
        if mlm.dense.use_bias:
            _assign(mlm.dense.bias, heads["transform_bias"], "masked-LM transform bias")
            _assign(mlm.layer_norm.beta, heads["ln_beta"], "masked-LM LayerNorm beta")
        _assign(mlm.output_bias, heads["output_bias"], "masked-LM output bias")
        written = ["masked-LM"]
        sentence = getattr(pretrainer, "next_sentence_head", None)
        if sentence is not None and "sentence_kernel" in heads:
            _assign(sentence.dense.kernel, np.asarray(heads["sentence_kernel"]),
                    "sentence kernel")
            _assign(sentence.dense.bias, heads["sentence_bias"], "sentence bias")
            written.append(pretrainer.sentence_objective.upper())
    except ValueError as err:
        raise CheckpointError(f"{source}: {err}") from None
    return written


#: ELECTRA's replaced-token head in `ElectraForPreTraining` checkpoints.
ELECTRA_DISCRIMINATOR = ("discriminator_predictions.dense",
                         "discriminator_predictions.dense_prediction")


def discriminator_head_from_hf(directory):
    """{"dense_kernel" [H, H], "dense_bias", "logits_kernel" [H, 1],
    "logits_bias"} of an ELECTRA discriminator checkpoint, or None."""
    dense, prediction = ELECTRA_DISCRIMINATOR
    tensors = read_checkpoint_directory(directory)
    if f"{dense}.weight" not in tensors:
        return None
    return {"dense_kernel": tensors[f"{dense}.weight"].T, "dense_bias": tensors[f"{dense}.bias"],
            "logits_kernel": tensors[f"{prediction}.weight"].T,
            "logits_bias": tensors[f"{prediction}.bias"]}


def set_discriminator_head(pretrainer, head, source):
    """Writes the published head into an `ElectraPretrainer`'s `rtd_head`."""
    try:
        _assign(pretrainer.rtd_head.dense.kernel, head["dense_kernel"], "discriminator dense")
        _assign(pretrainer.rtd_head.dense.bias, head["dense_bias"], "discriminator dense bias")
        _assign(pretrainer.rtd_head.logits.kernel, np.asarray(head["logits_kernel"]),
                "discriminator prediction")
        _assign(pretrainer.rtd_head.logits.bias, head["logits_bias"],
                "discriminator prediction bias")
    except ValueError as err:
        raise CheckpointError(f"{source}: {err}") from None
    return ["replaced-token"]
