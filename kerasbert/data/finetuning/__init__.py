"""Fine-tuning task data: sources -> examples -> model features -> tf.data / TFRecords.

    data = load_task("glue/mrpc", "train")              # TaskData (examples, task_type, label_names)
    features = convert_examples(data, tokenizer, 128)   # TaskFeatures (NumPy x, y, ...)
    model.fit(make_dataset(features, 32, shuffle=True, seed=0))

Names load on first use (no TensorFlow import for `kerasbert --help`).
"""

from kerasbert.io_utils import lazy_exports

_EXPORTS = {
    "TASK_TYPES": "kerasbert.data.finetuning.task_formats",
    "TaskFormat": "kerasbert.data.finetuning.task_formats",
    "task_format": "kerasbert.data.finetuning.task_formats",
    "register_format": "kerasbert.data.finetuning.task_formats",
    "TaskData": "kerasbert.data.finetuning.examples",
    "TaskDataError": "kerasbert.data.finetuning.examples",
    "load_task": "kerasbert.data.finetuning.load",
    "parse_task_spec": "kerasbert.data.finetuning.load",
    "VALID_SPECS": "kerasbert.data.finetuning.load",
    "TaskFeatures": "kerasbert.data.finetuning.features",
    "MODEL_INPUTS": "kerasbert.data.finetuning.features",
    "check_max_seq_length": "kerasbert.data.finetuning.features",
    "convert_examples": "kerasbert.data.finetuning.convert",
    "convert_classification": "kerasbert.data.finetuning.classification",
    "convert_tagging": "kerasbert.data.finetuning.tagging",
    "convert_qa": "kerasbert.data.finetuning.qa",
    "decode_span": "kerasbert.data.finetuning.qa",
    "convert_multiple_choice": "kerasbert.data.finetuning.multiple_choice",
    "make_dataset": "kerasbert.data.finetuning.dataset",
    "write_features": "kerasbert.data.finetuning.records",
    "read_features": "kerasbert.data.finetuning.records",
    "has_split": "kerasbert.data.finetuning.records",
    "features_dataset": "kerasbert.data.finetuning.records",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports("kerasbert.data.finetuning", _EXPORTS)
