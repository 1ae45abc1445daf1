"""Keras 3 layers shared by every model in the zoo (keras.ops only)."""

from kerasbert.layers.activations import get_activation
from kerasbert.layers.attention import MASK_BIAS
from kerasbert.layers.axial_position_embedding import AxialPositionEmbedding
from kerasbert.layers.attention import MultiHeadCrossAttention
from kerasbert.layers.attention import MultiHeadSelfAttention
from kerasbert.layers.attention import causal_attention_bias
from kerasbert.layers.attention import padding_mask_to_attention_bias
from kerasbert.layers.block_sparse_attention import BlockSparseSelfAttention
from kerasbert.layers.character_cnn import CharacterCNN
from kerasbert.layers.chunked_feed_forward import ChunkedFeedForward
from kerasbert.layers.embeddings import BertEmbeddings
from kerasbert.layers.highway import Highway
from kerasbert.layers.local_attention import LocalSelfAttention
from kerasbert.layers.lsh_attention import LSHSelfAttention
from kerasbert.layers.masked_lm_head import MaskedLMHead
from kerasbert.layers.pooler import ClsPooler
from kerasbert.layers.position_embedding import PositionEmbedding
from kerasbert.layers.pre_norm_branch import PreNormBranch
from kerasbert.layers.projected_lstm import ProjectedLSTM
from kerasbert.layers.reversible_sequence import ReversibleSequence
from kerasbert.layers.scalar_mix import ScalarMix
from kerasbert.layers.sentence_head import NextSentenceHead
from kerasbert.layers.sentence_pooling import SentencePooling
from kerasbert.layers.sinusoidal_position_encoding import SinusoidalPositionEncoding
from kerasbert.layers.transformer_block import TransformerEncoderBlock
from kerasbert.layers.transformer_decoder_block import TransformerDecoderBlock
