"""The value types of pretraining-instance creation (kerasbert.data.instances):
the special token ids, the creation options, and one unpadded instance."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Specials:
    """Special token ids, looked up by string in the vocabulary (never assumed)."""

    cls_id: int
    sep_id: int
    mask_id: int
    pad_id: int
    vocab_size: int


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """How instances are made (the create-pretraining-data flags of the same
    names): T = sequence_length, P = max_predictions_per_seq, the masking
    rate, the chance of a shorter target, whole-word masking, the sentence
    objective, and whether to mask at all (False: dynamic masking later)."""

    sequence_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    whole_word_mask: bool = False
    objective: str = "nsp"  # "nsp" | "sop" | "none"
    masking: bool = True


@dataclasses.dataclass
class Instance:
    """One training sequence (unpadded Python lists).

    tokens:          [L] ids of `[CLS] A [SEP] B [SEP]` (or `[CLS] A [SEP]`),
                     masked ids already substituted when masked.
    segment_ids:     [L] 0 for [CLS] A [SEP], 1 for B [SEP].
    word_starts:     [L] True where a word begins (specials are words).
    label:           1 = B random (NSP) / swapped (SOP), 0 = real order,
                     None for objective "none".
    masked_positions, masked_ids: [P] sorted positions and ORIGINAL ids.
    target_length:   the target the chunk aimed at (statistics only).
    """

    tokens: list
    segment_ids: list
    word_starts: list
    label: object = None
    masked_positions: list = dataclasses.field(default_factory=list)
    masked_ids: list = dataclasses.field(default_factory=list)
    target_length: int = 0
