"""What a handle points at, read from files only (no Keras, no TensorFlow):
the lowest floor that knows about checkpoints, so tokenizers, models,
converters and tasks all take a `Source` instead of re-reading a handle.

    handles                 hub handles (`hf://`, `kaggle://`, `gs://`)
                            to local folders, downloaded once
    source                  `resolve(handle) -> Source`: where the files
                            are, what layout they have (the one layout
                            detection), their config and sentence pooling
    sentence_transformers   the pooling of a sentence-transformers folder

Example:

>>> import json, os, tempfile
>>> from kerasbert.sources import resolve
>>> folder = tempfile.mkdtemp()
>>> with open(os.path.join(folder, "config.json"), "w") as f:
...     json.dump({"model_type": "bert", "vocab_size": 30, "hidden_size": 8,
...                "num_hidden_layers": 1, "num_attention_heads": 2,
...                "intermediate_size": 16, "max_position_embeddings": 16}, f)
>>> resolve(folder).kind
'hf'

The Keras objects a source stands for are built one floor up, in
`kerasbert.loading`. Names load on first use.
"""

from kerasbert.io_utils import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "source": ("Source", "resolve", "describe_handles"),
    "handles": ("local_path", "is_remote", "HandleError"),
    "sentence_transformers": ("read_sentence_model", "SentenceModel"),
})
