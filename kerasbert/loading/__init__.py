"""From a `Source` (`kerasbert.sources`) to the Keras objects callers use:
published checkpoints, kerasbert runs and `.keras` files.

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
    "backbones": ("load_backbone", "load_backbone_from_flags"),
    "masked_lm": ("load_masked_lm_from_handle", "fill_mask"),
    "generation": ("load_generator", "generate_text"),
})
