"""The task type registry: one `TaskType` per kind of fine-tuning task, and
everything that differs between kinds in one entry.

    entry            examples & labels      model             metrics
    classification   text, class            TextClassifier    evaluate_classes
    pair             text pair, class       TextClassifier    evaluate_classes
    regression       text, number           TextClassifier    evaluate_scores
    tagging          words, tag             TokenClassifier   evaluate_tags
    qa               squad, span            QuestionAnswerer  evaluate_spans
    multiple_choice  choices, choice        MultipleChoice    evaluate_choices
    text2text        text2text, target      Seq2SeqLM         evaluate_texts
                                            (outputs: generate_texts, beam search)

The data facts (`TaskFormat`) live in the data layer
(`kerasbert.data.finetuning.task_formats`); this entry adds the model, the
metrics and the defaults; its serving class is registered against its name
in the serving layer (`kerasbert.serving.task_servings`). Fine-tuning,
evaluation and export look the entry up by the run's task type name and
never compare names. To add a task type, write one file with its `TaskType`
(and its model or serving module if they are new), `register` it and
`register_serving` its serving class; see ARCHITECTURE.md.
"""

import dataclasses

from kerasbert.data.finetuning.dataset import make_dataset
from kerasbert.data.finetuning.task_formats import TaskFormat
from kerasbert.data.finetuning.task_formats import register_format
from kerasbert.data.finetuning.task_formats import task_format
from kerasbert.errors import UsageError
from kerasbert.metrics.glue import glue_main_metric
from kerasbert.models.gpt import GptBackbone
from kerasbert.models.transformer import TransformerBackbone
from kerasbert.tasks import task_evaluation
from kerasbert.tasks.gpt_classifier import GptClassifier
from kerasbert.tasks.multiple_choice import MultipleChoice
from kerasbert.tasks.question_answerer import QuestionAnswerer
from kerasbert.tasks.seq2seq_lm import Seq2SeqLM
from kerasbert.tasks.text_classifier import TextClassifier
from kerasbert.tasks.token_classifier import TokenClassifier


@dataclasses.dataclass(frozen=True)
class TaskType:
    """One kind of fine-tuning task.

    Attributes:
        format: its data facts (`TaskFormat`: example and label kinds).
        build: `(task_type, backbone, data, dropout) -> keras.Model`, the
            task model on an encoder backbone, sized by the `TaskData` or
            `TaskFeatures` `data` (label names, choices).
        evaluate: `(task, data, features, outputs, options) -> {name: float}`
            (kerasbert.tasks.task_evaluation).
        main_metric: the metric that ranks models of this type.
        gpt: a GPT backbone fine-tunes it (GPT-1's extract-token classifier).
        confusion_matrix: fine-tuning plots the validation confusion matrix.
        needs_examples: its metrics need the raw examples, not only features.
        predict: `(model, features, batch_size) -> outputs` for `evaluate`,
            where one forward pass is not the answer (text2text generates);
            None: `model.predict` on the features.
    """

    format: TaskFormat
    build: object
    evaluate: object
    main_metric: str
    gpt: bool = False
    confusion_matrix: bool = False
    needs_examples: bool = False
    predict: object = None

    @property
    def name(self):
        return self.format.name

    def num_outputs(self, features):
        """Scores per example: 1 for a number, else one per label name."""
        return 1 if self.format.float_labels else len(features.label_names)

    def build_model(self, backbone, features, dropout=0.1, extract_id=None, lm_weight=0.5):
        """The task model. A GPT backbone gets `GptClassifier` (extract
        token `extract_id`, auxiliary LM loss weighted `lm_weight`)."""
        if isinstance(backbone, TransformerBackbone) != self.format.generates_text:
            if self.format.generates_text:
                raise UsageError(f"A {self.name} task needs an encoder-decoder backbone (e.g. "
                                 f"--preset transformer_base), not a {type(backbone).__name__}.")
            raise UsageError(f"An encoder-decoder {type(backbone).__name__} fine-tunes text2text "
                             f"tasks, not {self.name}.")
        if isinstance(backbone, GptBackbone):
            if not self.gpt:
                supported = ", ".join(t.name for t in _TASK_TYPES.values() if t.gpt)
                raise UsageError(f"A GPT backbone fine-tunes {supported} tasks (GPT-1's "
                                 f"extract-token classifier), not {self.name}.")
            return GptClassifier(backbone, num_classes=self.num_outputs(features),
                                 extract_id=extract_id, lm_weight=lm_weight, dropout=dropout)
        return self.build(self, backbone, features, dropout)

    def predict_outputs(self, model, features, batch_size):
        """What `evaluate` scores: `predict`'s outputs, else `model.predict`
        on the features' batches."""
        if self.predict is not None:
            return self.predict(model, features, batch_size)
        padding = model.batch_padding() if hasattr(model, "batch_padding") else "max_length"
        return model.predict(make_dataset(features, batch_size, labels=False, padding=padding),
                             verbose=0)

    def written_predictions(self, outputs):
        """`predict_outputs`' outputs as lines of text (`evaluate
        --predictions FILE`: one generated text per example, in order), or
        None when the type's outputs are not text."""
        if not self.format.generates_text:
            return None
        return [" ".join(str(text).splitlines()) for text in outputs["predictions"]]

    def selection_metric(self, task):
        """The metric that picks the best epoch or trial of `task`: a GLUE
        task's official one (CoLA: MCC, MRPC/QQP: F1, STS-B: the mean of
        Pearson and Spearman), else `main_metric`."""
        if isinstance(task, str) and task.lower().startswith("glue/"):
            try:
                return glue_main_metric(task.split(":")[0])
            except (ValueError, KeyError):
                pass
        return self.main_metric


def _classifier(task_type, backbone, features, dropout):
    return TextClassifier(backbone, num_classes=task_type.num_outputs(features), dropout=dropout)


def _tagger(task_type, backbone, features, dropout):
    return TokenClassifier(backbone, num_labels=len(features.label_names), dropout=dropout)


def _answerer(task_type, backbone, features, dropout):
    return QuestionAnswerer(backbone, dropout=dropout)


def _chooser(task_type, backbone, features, dropout):
    return MultipleChoice(backbone, num_choices=features.num_labels, dropout=dropout)


def _seq2seq(task_type, backbone, features, dropout):
    # The backbone's own dropout applies; the model has no head to drop into.
    return Seq2SeqLM(backbone)


_TASK_TYPES = {}


def register(task_type):
    """Adds a task type (and its data format); returns it."""
    register_format(task_type.format)
    _TASK_TYPES[task_type.name] = task_type
    return task_type


def get(name):
    """The `TaskType` called `name`; a clear error if there is none."""
    task_format(name)  # names the registered types if unknown
    if name not in _TASK_TYPES:
        raise UsageError(f"Task type {name!r} has a data format but no registered TaskType.")
    return _TASK_TYPES[name]


def names():
    return tuple(_TASK_TYPES)


_EVALUATE = task_evaluation
for _entry in (
    TaskType(task_format("classification"), _classifier, _EVALUATE.evaluate_classes,
             "accuracy", gpt=True, confusion_matrix=True),
    TaskType(task_format("pair"), _classifier, _EVALUATE.evaluate_classes, "accuracy",
             gpt=True, confusion_matrix=True),
    TaskType(task_format("regression"), _classifier, _EVALUATE.evaluate_scores, "pearson",
             gpt=True),
    TaskType(task_format("tagging"), _tagger, _EVALUATE.evaluate_tags, "f1"),
    TaskType(task_format("qa"), _answerer, _EVALUATE.evaluate_spans, "f1",
             needs_examples=True),
    TaskType(task_format("multiple_choice"), _chooser, _EVALUATE.evaluate_choices,
             "accuracy"),
    TaskType(task_format("text2text"), _seq2seq, _EVALUATE.evaluate_texts, "bleu",
             needs_examples=True, predict=_EVALUATE.generate_texts),
):
    register(_entry)
