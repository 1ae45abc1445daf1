"""Task metrics of model outputs on converted features, one function per
kind of prediction. Each takes `(task, data, features, outputs, options)`:

    task      the task spec ("glue/mrpc", "csv:PATH"): GLUE tasks add their
              official metrics
    data      the `TaskData` the features came from (QA needs its contexts
              and answers; None when features were read from TFRecords)
    features  `TaskFeatures` with labels
    outputs   what `model.predict` returned on the features
    options   the run's decoding options (QA: max_answer_length,
              null_score_diff_threshold)

and returns {metric name: float}. `kerasbert.tasks.task_types` says which
one a task type uses. A task type that writes text (text2text) gets its
`outputs` from `generate_texts` instead of `model.predict`.
"""

import keras
import numpy as np

from kerasbert import metrics
from kerasbert.data.finetuning.dataset import make_dataset
from kerasbert.preprocessing.qa_decoding import decode_answers
from kerasbert.preprocessing.text2text_preprocessor import decode_generated
from kerasbert.tasks.token_classifier import decode_word_labels


def evaluate_classes(task, data, features, outputs, options):
    """Accuracy, F1 (binary or macro), MCC, the GLUE task's metrics and the
    majority-class baseline."""
    labels = np.asarray(features.y)
    predictions = np.asarray(outputs).argmax(-1)
    num_classes = len(features.label_names)
    average = "binary" if num_classes == 2 else "macro"
    result = {"accuracy": metrics.accuracy(labels, predictions),
              "f1": metrics.f1(labels, predictions, average=average),
              "matthews_corrcoef": metrics.matthews_corrcoef(labels, predictions)}
    if task.startswith("glue/"):
        result.update(metrics.glue_metrics(task, labels, predictions))
    result["majority_baseline_accuracy"] = float(
        np.bincount(labels, minlength=num_classes).max() / len(labels))
    return result


def evaluate_choices(task, data, features, outputs, options):
    """Accuracy of the chosen answer."""
    predictions = np.asarray(outputs).argmax(-1)
    return {"accuracy": metrics.accuracy(np.asarray(features.y), predictions)}


def evaluate_scores(task, data, features, outputs, options):
    """Pearson and Spearman correlations and the mean squared error."""
    labels = np.asarray(features.y, "float64")
    predictions = np.asarray(outputs, "float64").reshape(-1)
    result = metrics.correlations(labels, predictions)
    result["mse"] = float(np.mean((labels - predictions) ** 2))
    return result


def evaluate_tags(task, data, features, outputs, options):
    """Entity-level precision, recall and F1 over the words' first sub-tokens."""
    word_ids = features.extras["word_ids"]
    gold = decode_word_labels(features.y, word_ids, features.label_names)
    pred = decode_word_labels(np.asarray(outputs), word_ids, features.label_names)
    return metrics.tagging_metrics(gold, pred)


def evaluate_spans(task, data, features, outputs, options):
    """SQuAD exact match and F1 (v2.0's with no-answer counts when some
    questions have no answer) of the decoded answer texts."""
    offsets = np.stack([features.extras["token_start_char"],
                        features.extras["token_end_char"]], -1)
    v2 = any(ex.get("is_impossible") for ex in data.examples)
    predictions = decode_answers(
        [ex["context"] for ex in data.examples], outputs["start_logits"],
        outputs["end_logits"], offsets, features.extras["example_index"],
        token_is_max_context=features.extras.get("token_is_max_context"),
        max_answer_length=options["max_answer_length"],
        null_score_diff_threshold=options["null_score_diff_threshold"],
        version_2_with_negative=v2)
    gold = {ex["id"]: [a["text"] for a in ex["answers"]] for ex in data.examples}
    texts = {ex["id"]: p.text for ex, p in zip(data.examples, predictions)}
    if v2:
        return metrics.squad_v2_metrics(gold, texts)
    return metrics.squad_v1_metrics(gold, texts)


def generate_texts(model, features, batch_size, strategy="beam", beam_size=4,
                   length_penalty=0.6):
    """The outputs of a text2text model on features: its `generate` (beam
    search by default) on each batch's encoder inputs, decoded by its
    preprocessor's tokenizer.

    Returns:
        {"predictions": list of str; "targets": the features' labels decoded
        the same way (the targets as the tokenizer writes them: cased or
        not, punctuation spaced as its pieces are), or None without labels;
        "lowercase": whether the tokenizer lower-cases}.
    """
    preprocessor = model.preprocessor
    tokenizer = preprocessor.tokenizer
    texts = []
    for x in make_dataset(features, batch_size, labels=False):
        # NumPy in: the model may run under another Keras backend than tf.data's.
        ids = model.generate(x["encoder_token_ids"].numpy(), x["encoder_padding_mask"].numpy(),
                             max_length=preprocessor.target_length,
                             start_id=preprocessor.start_id, end_id=preprocessor.end_id,
                             strategy=strategy, beam_size=beam_size,
                             length_penalty=length_penalty)
        decoded, _ = decode_generated(tokenizer, keras.ops.convert_to_numpy(ids))
        texts.extend(t.decode("utf-8") for t in decoded.numpy().tolist())
    targets = None
    if features.y is not None:
        decoded, _ = decode_generated(tokenizer, np.asarray(features.y))
        targets = [t.decode("utf-8") for t in decoded.numpy().tolist()]
    return {"predictions": texts, "targets": targets,
            "lowercase": bool(getattr(tokenizer, "lower_case", False))}


def evaluate_texts(task, data, features, outputs, options):
    """Corpus BLEU (sacreBLEU, 0-100) of the generated texts against the
    examples' targets as written (case-insensitive when the tokenizer
    lower-cases), and `exact_match`: the share of generations equal to
    their target as the tokenizer writes it (every piece right; white space
    normalised). A WordPiece tokenizer writes punctuation as pieces of its
    own ("object ' s"), which BLEU's 13a tokenization does not split from
    words, so BLEU against the raw targets counts those words as misses;
    SentencePiece and byte-level BPE vocabularies write text back as it
    was."""
    predictions = outputs["predictions"]
    references = [ex["target"] for ex in data.examples]
    lowercase = outputs.get("lowercase", False)
    result = {"bleu": metrics.bleu(predictions, references, lowercase=lowercase)}
    targets = outputs.get("targets")
    if targets is not None:
        exact = [" ".join(p.split()) == " ".join(t.split()) for p, t in zip(predictions, targets)]
        result["exact_match"] = float(np.mean(exact)) if exact else 0.0
    return result
