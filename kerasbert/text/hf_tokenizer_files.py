"""What a Hugging Face tokenizer's files state about tokenization, read
from FILE PATHS in plain Python (no TensorFlow): the longest word, the
added (special) tokens and their flags, the casing, and a Unigram model
rebuilt as a SentencePiece model.

    fact                     tokenizer.json                   tokenizer_config.json
    longest word (chars)     model.max_input_chars_per_word   max_input_chars_per_word
                                                              (else transformers' 100)
    added tokens             added_tokens (content, special,  added_tokens_decoder, else the
                               lstrip, rstrip, single_word,     *_token entries
                               normalized)
    lower case               normalizer: BertNormalizer's     do_lower_case
                               lowercase, a Lowercase step
    Unigram model            model.vocab [[piece, score]],    -
                               unk_id, byte_fallback;
                               normalizer's Precompiled
                               charsmap; Metaspace

Where both files say something, tokenizer.json wins: it is what the
`tokenizers` library (and transformers' fast tokenizers) run.
`tokenizer_options` gathers the constructor options of our tokenizer
classes from them; `keras_hub_options` those of a keras-hub preset's
tokenizer.json (keras-hub's tokenizer config).
"""

import base64
import json
import os
import struct

from kerasbert.errors import UsageError
from kerasbert.text.families import BPE
from kerasbert.text.families import SENTENCEPIECE
from kerasbert.text.families import WORDPIECE
from kerasbert.text.special_strings import AddedToken

TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
#: The longest word of transformers' BertTokenizer and of `tokenizers`'
#: WordPiece when the files do not say.
TRANSFORMERS_MAX_CHARS = 100
#: google-research/bert's tokenization.py (a checkpoint with a plain vocab.txt).
GOOGLE_BERT_MAX_CHARS = 200

# tokenizer_config.json's special-token entries (transformers' names).
_CONFIG_TOKEN_KEYS = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
                      "bos_token", "eos_token")


def _read(path):
    """The parsed JSON file, or None where `path` is None or missing.

    Raises:
        UsageError: the file exists and is not JSON (naming it).
    """
    if path is None or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UsageError(f"{path}: not a readable JSON file ({error}).") from None


def _model(tokenizer_json, data):
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(model, dict):
        raise UsageError(f"{tokenizer_json}: not a tokenizers library tokenizer.json "
                         "(no 'model' object).")
    return model


def max_chars_per_word(tokenizer_json=None, tokenizer_config=None):
    """The longest word (characters) a WordPiece tokenizer keeps: the
    tokenizer.json's, else tokenizer_config.json's, else transformers' 100.

    Raises:
        UsageError: a value that is not a positive integer, naming the file.
    """
    data = _read(tokenizer_json)
    for path, value in ((tokenizer_json, data and _model(tokenizer_json, data).get(
            "max_input_chars_per_word")),
                        (tokenizer_config, (_read(tokenizer_config) or {}).get(
                            "max_input_chars_per_word"))):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{path}: max_input_chars_per_word must be a positive integer, "
                             f"got {value!r}.")
        return value
    return TRANSFORMERS_MAX_CHARS


def added_tokens(tokenizer_json=None, tokenizer_config=None):
    """The added tokens the files register, as `AddedToken`s in id order,
    or None where they register none (the family's default then applies).

    tokenizer.json's `added_tokens`; else tokenizer_config.json's
    `added_tokens_decoder` (transformers >= 4.34), else its `*_token` and
    `additional_special_tokens` entries (a string, or an AddedToken dict).

    Raises:
        UsageError: a malformed entry, naming the file.
    """
    data = _read(tokenizer_json)
    try:
        if data is not None and data.get("added_tokens"):
            entries = sorted(data["added_tokens"], key=lambda e: e.get("id", 0))
            return [AddedToken.from_json(e, tokenizer_json) for e in entries]
        config = _read(tokenizer_config) or {}
        decoder = config.get("added_tokens_decoder")
        if isinstance(decoder, dict) and decoder:
            entries = [decoder[k] for k in sorted(decoder, key=int)]
            return [AddedToken.from_json(e, tokenizer_config) for e in entries]
        named = [config[k] for k in _CONFIG_TOKEN_KEYS if config.get(k)]
        named += list(config.get("additional_special_tokens") or [])
        if not named:
            return None
        result, seen = [], set()
        for entry in named:
            token = (AddedToken(entry) if isinstance(entry, str)
                     else AddedToken.from_json(dict(entry, special=True), tokenizer_config))
            if token.content not in seen:
                seen.add(token.content)
                result.append(token)
        return result
    except (ValueError, TypeError, AttributeError) as error:
        raise UsageError(str(error)) from None


def lower_case(tokenizer_json=None, tokenizer_config=None):
    """True / False where the files say (tokenizer_config.json's
    do_lower_case, else tokenizer.json's normalizer), else None."""
    config = _read(tokenizer_config) or {}
    if "do_lower_case" in config:
        return bool(config["do_lower_case"])
    normalizer = (_read(tokenizer_json) or {}).get("normalizer") or {}
    steps = normalizer.get("normalizers") if normalizer.get("type") == "Sequence" else [normalizer]
    for step in steps or []:
        if isinstance(step, dict) and "lowercase" in step:
            return bool(step["lowercase"])
        if isinstance(step, dict) and step.get("type") == "Lowercase":
            return True
    return None


def model_vocabulary(tokenizer_json):
    """(model type, tokens in id order) of a tokenizer.json: the model's
    vocabulary and the added tokens whose ids lie beyond it.

    Raises:
        UsageError: ids that are not 0..N-1, naming the file.
    """
    data = _read(tokenizer_json)
    model = _model(tokenizer_json, data)
    vocab = model.get("vocab")
    if model.get("type") == "Unigram":
        pairs = [(entry[0], i) for i, entry in enumerate(vocab or [])]
    elif isinstance(vocab, dict):
        pairs = list(vocab.items())
    else:
        raise UsageError(f"{tokenizer_json}: its {model.get('type')} model has no vocabulary.")
    ids = {i for _, i in pairs}
    pairs += [(e["content"], e["id"]) for e in data.get("added_tokens") or []
              if isinstance(e, dict) and isinstance(e.get("id"), int) and e["id"] not in ids]
    pairs.sort(key=lambda pair: pair[1])
    if [i for _, i in pairs] != list(range(len(pairs))):
        raise UsageError(f"{tokenizer_json}: the vocabulary's ids are not 0..N-1.")
    return model.get("type"), [token for token, _ in pairs]


def tokenizer_options(kind, tokenizer_json=None, tokenizer_config=None,
                      model_from_tokenizer_json=False):
    """Our tokenizer class's constructor options for a Hugging Face
    tokenizer (the file paths may be missing files or None).

    Args:
        kind: the family (`kerasbert.text.families`).
        tokenizer_json, tokenizer_config: paths.
        model_from_tokenizer_json: the model file was rebuilt from the
            tokenizer.json (`files_from_tokenizer_json`); a SentencePiece
            model then takes tokenizers' whitespace handling.

    Returns:
        {"max_chars_per_word": ..., "added_tokens": [...],
        "tokenizers_unigram": ...}, the keys that apply to `kind`.
    """
    options = {}
    tokens = added_tokens(tokenizer_json, tokenizer_config)
    if tokens is not None:
        options["added_tokens"] = tokens
    if kind == WORDPIECE:
        options["max_chars_per_word"] = max_chars_per_word(tokenizer_json, tokenizer_config)
    data = _read(tokenizer_json) if kind == BPE else None
    if isinstance(data, dict):
        options["trim_offsets"], options["offsets_prefix_space"] = offset_trimming(
            data.get("post_processor"))
    if kind == SENTENCEPIECE and model_from_tokenizer_json:
        options["tokenizers_unigram"] = unigram_pipeline(tokenizer_json)["tokenizers_unigram"]
    return options


def offset_trimming(processor):
    """(trim_offsets, add_prefix_space) of a byte-level tokenizer.json's
    post-processor as `tokenizers` reads it: a ByteLevel or
    RobertaProcessing step (the first such one of a Sequence) trims the
    spaces off pieces' offsets where its trim_offsets is true. `tokenizers`
    reads a RobertaProcessing lacking either key as a BertProcessing (no
    trimming) and refuses a ByteLevel lacking them: neither trims here.
    No such step (ModernBERT's TemplateProcessing): (False, False)."""
    if not isinstance(processor, dict):
        return False, False
    if processor.get("type") == "Sequence":
        steps = [offset_trimming(p) for p in processor.get("processors") or []]
        return next((step for step in steps if step[0]), (False, False))
    if processor.get("type") not in ("ByteLevel", "RobertaProcessing"):
        return False, False
    return bool(processor.get("trim_offsets")), bool(processor.get("add_prefix_space"))


#: The special tokens keras-hub's tokenizers match in text (no [UNK] or
#: <unk>, no lstrip): its BertTokenizer with special_tokens_in_strings, its
#: RobertaTokenizer always (its byte-level BPE keeps them unsplit).
KERAS_HUB_SPECIAL_TOKENS = {WORDPIECE: ("[CLS]", "[SEP]", "[PAD]", "[MASK]"),
                            BPE: ("<s>", "</s>", "<pad>", "<mask>")}


def keras_hub_options(kind, tokenizer_json):
    """Our constructor options for a keras-hub preset's tokenizer (its
    tokenizer.json holds the keras-hub tokenizer's config): its special
    tokens; for WordPiece also keras-hub's pipeline (`normalization`) and its
    special_tokens_in_strings. (keras-hub's RoBERTa tokenizer matches its
    special tokens always: `special_tokens_in_strings=True` reproduces it,
    the default stays off. Its SentencePiece tokenizer runs the same op as
    ours, and matches none.)"""
    if kind not in KERAS_HUB_SPECIAL_TOKENS:
        return {}
    config = ((_read(tokenizer_json) or {}).get("config") or {})
    tokens = list(KERAS_HUB_SPECIAL_TOKENS[kind]) + list(config.get("special_tokens") or [])
    options = {"added_tokens": [AddedToken(t) for t in dict.fromkeys(tokens)]}
    if kind == WORDPIECE:
        options.update(normalization="keras_hub_strip_accents" if config.get("strip_accents")
                       else "keras_hub",
                       special_tokens_in_strings=bool(config.get("special_tokens_in_strings",
                                                                 False)))
    return options


# --- Unigram -> SentencePiece ---------------------------------------------------

#: The NormalizerSpec name of a SentencePiece model rebuilt from a Unigram
#: tokenizer.json: it tokenizes as `tokenizers` does (`SentencePieceTokenizer`
#: with exact_unigram); with this suffix its Metaspace does not split words.
TOKENIZER_JSON_MODEL = "tokenizer_json"
UNSPLIT = ":unsplit"
#: A field of ModelProto's extension range (200 and up) that holds the
#: model's float64 scores where a tokenizer.json's score is no float32
#: (`tokenizers` adds them in float64); SentencePiece and the op ignore it.
FLOAT64_SCORES_FIELD = 7342


def _varint(value):
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def float64_scores(proto):
    """The float64 scores a serialized ModelProto keeps in
    `FLOAT64_SCORES_FIELD`, or None (its top-level fields read in the
    protocol buffer wire format)."""
    position = 0

    def varint():
        nonlocal position
        value = shift = 0
        while True:
            byte = proto[position]
            position += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    try:
        while position < len(proto):
            key = varint()
            field, wire = key >> 3, key & 7
            if wire == 0:
                varint()
            elif wire == 1:
                position += 8
            elif wire == 5:
                position += 4
            elif wire == 2:
                size = varint()
                if field == FLOAT64_SCORES_FIELD:
                    return list(struct.unpack_from(f"<{size // 8}d", proto, position))
                position += size
            else:
                return None
    except (IndexError, struct.error):
        return None
    return None


def unigram_pipeline(tokenizer_json):
    """What a Unigram tokenizer.json's normalizer and pre-tokenizer do, in
    the terms of a SentencePiece model: {"charsmap": bytes or b"",
    "lower_case": bool, "add_dummy_prefix": bool, "tokenizers_unigram":
    bool}.

    Understood: a normalizer of Precompiled (SentencePiece's own charsmap),
    Replace(" {2,}", " ") and Lowercase steps; a Metaspace pre-tokenizer
    ("▁", prepend_scheme "always" / "never", words split at "▁" or not:
    "split"), alone (every space is kept, a final one as "▁":
    `tokenizers_unigram`) or after WhitespaceSplit.

    Raises:
        UsageError: any other step, naming it and the file.
    """
    data = _read(tokenizer_json)
    normalizer = data.get("normalizer") or {}
    steps = normalizer.get("normalizers") if normalizer.get("type") == "Sequence" else (
        [normalizer] if normalizer else [])
    result = {"charsmap": b"", "lower_case": False, "add_dummy_prefix": True, "split": True}
    collapses = False
    for step in steps:
        kind = step.get("type")
        if kind == "Precompiled":
            result["charsmap"] = base64.b64decode(step.get("precompiled_charsmap") or "")
        elif kind == "Lowercase":
            result["lower_case"] = True
        elif kind == "Replace" and step.get("pattern") == {"Regex": " {2,}"} \
                and step.get("content") == " ":
            collapses = True
        else:
            raise UsageError(f"{tokenizer_json}: its normalizer step {json.dumps(step)[:120]} "
                             "has no SentencePiece equivalent here (understood: Precompiled, "
                             "Replace(' {2,}', ' '), Lowercase); give the spiece.model.")
    pre = data.get("pre_tokenizer") or {}
    parts = pre.get("pretokenizers") if pre.get("type") == "Sequence" else [pre]
    kinds = [p.get("type") for p in parts]
    if kinds not in (["Metaspace"], ["WhitespaceSplit", "Metaspace"]):
        raise UsageError(f"{tokenizer_json}: pre-tokenizer {kinds} is not understood here "
                         "(Metaspace, or WhitespaceSplit then Metaspace); give the "
                         "spiece.model.")
    metaspace = parts[-1]
    scheme = metaspace.get("prepend_scheme", "always" if metaspace.get(
        "add_prefix_space", True) else "never")
    if metaspace.get("replacement", "\u2581") != "\u2581" or scheme not in ("always", "never"):
        raise UsageError(f"{tokenizer_json}: Metaspace with replacement "
                         f"{metaspace.get('replacement')!r} and prepend_scheme {scheme!r} is "
                         "not understood here (\"▁\", always / never); give the spiece.model.")
    result["add_dummy_prefix"] = scheme == "always"
    result["split"] = bool(metaspace.get("split", True))
    whitespace_split = kinds[0] == "WhitespaceSplit"
    if not whitespace_split and not collapses:
        raise UsageError(f"{tokenizer_json}: a Metaspace pipeline without Replace(' {{2,}}', "
                         "' ') keeps runs of spaces, which is not understood here; give the "
                         "spiece.model.")
    # WhitespaceSplit drops every space as SentencePiece's own clean-up does.
    result["tokenizers_unigram"] = not whitespace_split
    return result


def unigram_model_proto(tokenizer_json, special_tokens=()):
    """A serialized SentencePiece ModelProto equal to a Unigram
    tokenizer.json's model: the same pieces and scores, the unknown piece,
    added tokens that are special as control pieces (never produced from
    text, as in SentencePiece's own models), other added tokens as
    user-defined pieces, `<0xNN>` pieces as bytes when the model falls
    back to bytes, and the normalizer's charsmap.

    Args:
        tokenizer_json: path.
        special_tokens: further pieces to make control pieces (the
            family's special tokens, so text never produces them).

    Raises:
        UsageError: a malformed file or a pipeline `unigram_pipeline`
            refuses, naming the file.
    """
    from sentencepiece import sentencepiece_model_pb2  # lazy: only Unigram files need it

    data = _read(tokenizer_json)
    model = _model(tokenizer_json, data)
    pipeline = unigram_pipeline(tokenizer_json)
    vocab = model.get("vocab")
    unk_id = model.get("unk_id")
    if not isinstance(vocab, list) or not vocab or not all(
            isinstance(e, list) and len(e) == 2 and isinstance(e[0], str)
            and isinstance(e[1], (int, float)) for e in vocab):
        raise UsageError(f"{tokenizer_json}: a Unigram model's vocab must be a list of "
                         "[piece, score] pairs.")
    if not isinstance(unk_id, int) or not 0 <= unk_id < len(vocab):
        raise UsageError(f"{tokenizer_json}: Unigram unk_id {unk_id!r} is not an id of its "
                         "vocabulary (SentencePiece needs an unknown piece).")
    byte_fallback = bool(model.get("byte_fallback"))
    added = {e["content"]: bool(e.get("special")) for e in data.get("added_tokens") or []
             if isinstance(e, dict) and isinstance(e.get("content"), str)}
    control = {c for c, special in added.items() if special} | set(special_tokens)
    types = sentencepiece_model_pb2.ModelProto.SentencePiece
    proto = sentencepiece_model_pb2.ModelProto()
    for i, (piece, score) in enumerate(vocab):
        entry = proto.pieces.add(piece=piece, score=float(score))
        if i == unk_id:
            entry.type = types.UNKNOWN
        elif piece in control:
            entry.type = types.CONTROL
        elif piece in added:
            entry.type = types.USER_DEFINED
        elif byte_fallback and len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            entry.type = types.BYTE
    proto.trainer_spec.model_type = sentencepiece_model_pb2.TrainerSpec.UNIGRAM
    proto.trainer_spec.vocab_size = len(vocab)
    proto.trainer_spec.byte_fallback = byte_fallback
    proto.trainer_spec.unk_id = unk_id
    proto.trainer_spec.unk_piece = vocab[unk_id][0]
    for name in ("bos_id", "eos_id", "pad_id"):
        setattr(proto.trainer_spec, name, -1)
    spec = proto.normalizer_spec
    spec.name = TOKENIZER_JSON_MODEL + ("" if pipeline["split"] else UNSPLIT)
    spec.precompiled_charsmap = pipeline["charsmap"]
    spec.add_dummy_prefix = pipeline["add_dummy_prefix"]
    spec.remove_extra_whitespaces = True
    spec.escape_whitespaces = True
    serialized = proto.SerializeToString()
    scores = [float(score) for _, score in vocab]
    if any(entry.score != score for entry, score in zip(proto.pieces, scores)):
        payload = struct.pack(f"<{len(scores)}d", *scores)
        serialized += (_varint(FLOAT64_SCORES_FIELD << 3 | 2) + _varint(len(payload))
                       + payload)
    return serialized
