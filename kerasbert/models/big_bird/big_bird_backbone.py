"""BigBird encoder (block-sparse attention) with BERT's tensor names."""

import keras

from kerasbert.models.bert.bert_backbone import BertBackbone


@keras.saving.register_keras_serializable(package="kerasbert")
class BigBirdBackbone(BertBackbone):
    """BigBird encoder (Zaheer et al., 2020), ITC form, as BigBird-RoBERTa.

    BERT's architecture (embeddings with a 4096-row position table and two
    segment types, post-LayerNorm blocks, tanh pooler) whose self-attention
    is `BlockSparseSelfAttention`: each block of `block_size` tokens attends
    the two global blocks (first and last, which themselves attend
    everything), its sliding window of 3 blocks and `num_random_blocks`
    random blocks fixed per layer (seeded by the layer index). The weights
    are exactly those of full attention: `attention="full"` builds the same
    variables, and a checkpoint loads into either.

    Long inputs, what "4096 tokens" needs:
        - `max_sequence_length` >= the packed length (4096 in the presets);
          fine-tune with `kerasbert finetune --max-seq-length 4096` (QA:
          documents longer than that are still windowed by --doc-stride).
        - Inputs longer than (5 + 2 * num_random_blocks) * block_size
          tokens (704 for the presets) use block-sparse attention; shorter
          ones use full attention (exact, and cheaper at that size).
          Lengths are padded internally to a multiple of `block_size`.
        - Attention scores per layer are about B * heads * T *
          (5 + num_random_blocks + 2) * block_size: at T = 4096, base,
          batch 1, ~31 M floats instead of 201 M for full attention, and
          linear in T (`bench/long_sequence_bench.py` measures it).
        - The tokenizer: BigBird-RoBERTa's vocabulary is a SentencePiece
          model (`gpt2.model`, 50358 pieces with `[CLS]`, `[SEP]`,
          `<pad>`, `[MASK]`); give it as `--vocab .../gpt2.model
          --no-lower-case` (it is cased), which packs
          `[CLS] a [SEP] b [SEP]` with type ids 0/1 like BERT.

    Inputs and outputs: see `Backbone`. Args: `BertBackbone`'s, with the
    checkpoints' defaults: 4096 positions, activation "gelu_approximate"
    (their "gelu_new"), attention "bigbird" with 64-token blocks and 3
    random blocks; vocabulary_size 50358 for the released checkpoints.

    Example:

    >>> import numpy as np
    >>> from kerasbert.models import BigBirdBackbone
    >>> backbone = BigBirdBackbone(vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8,
    ...                            intermediate_dim=16, max_sequence_length=64, block_size=4,
    ...                            num_random_blocks=1)
    >>> ids = np.full((1, 32), 5)                             # [B, T], 8 blocks of 4
    >>> outputs = backbone({"input_word_ids": ids, "input_mask": np.ones_like(ids),
    ...                     "input_type_ids": np.zeros_like(ids)})
    >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
    ((1, 32, 8), (1, 8))
    """

    def __init__(self, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                 max_sequence_length=4096, activation="gelu_approximate", attention="bigbird",
                 **kwargs):
        # BERT's layers and graph; only these defaults differ.
        super().__init__(vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                         max_sequence_length=max_sequence_length, activation=activation,
                         attention=attention, **kwargs)
