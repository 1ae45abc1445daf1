"""From a handle to what callers use: published checkpoints, kerasbert runs
and `.keras` files.

    source                  `resolve(handle) -> Source`: where the files are
                            (hub handles downloaded by `handles`) and what
                            they are (kind, config, sentence pooling); files
                            only, so the tokenizer layer uses it too
    sentence_transformers   the pooling of a sentence-transformers folder
    published               our backbone from a peer's layout (Hugging Face,
                            keras-hub, google-research/bert, TF Hub)
    backbones               any handle -> backbone, and the CLI's flag rules
    masked_lm               a pretrainer with its published masked-LM head
    generation              a causal LM and its tokenizer, prompts in and out

The tokenizer of a source is `kerasbert.text.load_tokenizer(handle)`.
Names load on first use, so importing the package does not pull in
TensorFlow.
"""

from kerasbert.io_utils import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "source": ("Source", "resolve", "describe_handles"),
    "handles": ("local_path", "is_remote", "HandleError"),
    "backbones": ("load_backbone", "load_backbone_from_flags"),
    "masked_lm": ("load_masked_lm_from_handle", "fill_mask"),
    "generation": ("load_generator", "generate_text"),
    "sentence_transformers": ("read_sentence_model", "SentenceModel"),
})
