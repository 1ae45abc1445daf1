"""Fine-tuning task data: sources -> examples -> model features -> tf.data / TFRecords.

    data = load_task("glue/mrpc", "train")              # TaskData (examples, task_type, label_names)
    features = convert_examples(data, tokenizer, 128)   # TaskFeatures (NumPy x, y, ...)
    model.fit(make_dataset(features, 32, shuffle=True, seed=0))

Names load on first use (no TensorFlow import for `kerasbert --help`).
"""

from kerasbert.io_utils import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "task_formats": ("TASK_TYPES", "TaskFormat", "task_format", "register_format"),
    "examples": ("TaskData", "TaskDataError"),
    "load": ("load_task", "parse_task_spec", "VALID_SPECS"),
    "features": ("TaskFeatures", "MODEL_INPUTS", "check_max_seq_length"),
    "convert": ("convert_examples",),
    "classification": ("convert_classification",),
    "tagging": ("convert_tagging",),
    "qa": ("convert_qa", "decode_span"),
    "multiple_choice": ("convert_multiple_choice",),
    "text2text": ("convert_text2text",),
    "dataset": ("make_dataset",),
    "records": ("write_features", "read_features", "has_split", "features_dataset"),
})
