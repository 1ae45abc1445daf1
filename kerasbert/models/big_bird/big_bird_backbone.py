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

    Inputs (dict of int32 [B, T], the TF Hub names):
        input_word_ids, input_mask (1 real, 0 padding), input_type_ids.

    Outputs (dict):
        sequence_output: [B, T, hidden_dim], the last layer.
        pooled_output: [B, hidden_dim], tanh(dense(first token)).
        encoder_outputs: list of num_layers tensors [B, T, hidden_dim].

    Args:
        vocabulary_size: int. 50358 for the released checkpoints.
        num_layers: int.
        num_heads: int. hidden_dim must divide by it.
        hidden_dim: int.
        intermediate_dim: int. Feed-forward width.
        max_sequence_length: int. Rows of the position table (4096).
        num_segments: int. Rows of the segment table (2).
        dropout: float. Hidden and attention-probability dropout.
        embedding_dim: int or None. As `BertBackbone` (None: hidden_dim).
        activation: str. "gelu_approximate" (the checkpoints' "gelu_new").
        layer_norm_epsilon: float.
        initializer_range: float.
        attention: "bigbird" (block-sparse) or "full".
        block_size: int. Tokens per attention block (64).
        num_random_blocks: int. Random key blocks per query block (3).
        dtype: a dtype or `keras.DTypePolicy`, e.g. "mixed_float16".
    """

    def __init__(self, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                 max_sequence_length=4096, num_segments=2, dropout=0.1, embedding_dim=None,
                 activation="gelu_approximate", layer_norm_epsilon=1e-12, initializer_range=0.02,
                 attention="bigbird", block_size=64, num_random_blocks=3, dtype=None, **kwargs):
        # BERT's layers and graph; only the defaults differ (4096 positions,
        # the checkpoints' tanh GELU, block-sparse attention).
        self._build_encoder(locals(), num_segments=num_segments, embedding_dim=embedding_dim,
                            pooler=True)
