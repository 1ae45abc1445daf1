"""`kerasbert generate`: continue a prompt with a GPT run.

    kerasbert generate --model RUN --prompt "The cat" [--max-new-tokens 32]
        [--strategy greedy|top_k|top_p] [--top-k 50] [--top-p 0.9]
        [--temperature 1.0] [--seed N] [--vocab PATH]

RUN is a `kerasbert pretrain` run directory of a GPT preset
(pretrainer.keras or backbone.keras; the tokenizer is the run's --vocab,
read from config.json), a `kerasbert finetune` directory of a GPT model
(model.keras and its tokenizer files), or a `.keras` file (then --vocab is
required). The prompt is encoded as the pretraining data was: the start
token ([CLS] / <s>) and the prompt's pieces; generation stops at the
separator ([SEP] / </s>), which ends every pretraining sequence.
"""

import json
import os

from kerasbert.errors import UsageError


def _read_config(run):
    path = os.path.join(run, "config.json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _pretraining_tokenizer(run, config):
    """The tokenizer a pretraining run was trained with (config.json's
    pretrain.vocab, as given on its command line, else beside the run)."""
    from kerasbert.text import load_tokenizer

    vocab = config["pretrain"]["vocab"]
    candidates = [vocab] if os.path.isabs(vocab) else [vocab, os.path.join(run, vocab)]
    for path in candidates:
        if os.path.exists(path):
            meta = (config.get("data") or {}).get("metadata") or {}
            return load_tokenizer(path, lower_case=meta.get("lower_case"))
    raise UsageError(f"{run}/config.json names the vocabulary {vocab}, which is not there "
                     "any more: pass --vocab.")


def load_generator(model, vocab=None, lower_case=None):
    """(CausalLM, tokenizer, source description) for a run directory or a
    .keras file (see the module docstring)."""
    from kerasbert.models.gpt import GptBackbone
    from kerasbert.tasks.causal_lm import CausalLM
    from kerasbert.text import load_saved_tokenizer, load_tokenizer

    config = None
    if os.path.isdir(model):
        config = _read_config(model)
        for name in ("pretrainer.keras", "model.keras", "backbone.keras"):
            path = os.path.join(model, name)
            if os.path.isfile(path):
                break
        else:
            raise UsageError(f"--model {model}: no pretrainer.keras, model.keras or "
                             "backbone.keras (not a kerasbert pretrain or finetune run).")
    elif os.path.isfile(model) and model.endswith(".keras"):
        path = model
    else:
        raise UsageError(f"--model {model}: not a run directory or a .keras file.")
    from kerasbert.saving import load_model

    loaded = load_model(path)
    backbone = loaded if isinstance(loaded, GptBackbone) else getattr(loaded, "backbone", None)
    if not isinstance(backbone, GptBackbone):
        raise UsageError(f"{path} holds a {type(backbone or loaded).__name__}, not a GPT model: "
                         "generation needs a causal decoder (e.g. --preset gpt1).")
    lm = loaded if isinstance(loaded, CausalLM) else CausalLM(backbone)

    if vocab is not None:
        tokenizer = load_tokenizer(vocab, lower_case=lower_case)
    elif config is not None and "pretrain" in config:
        tokenizer = _pretraining_tokenizer(model, config)
    elif config is not None and ("tokenizer" in config or "vocab" in config):
        tokenizer = load_saved_tokenizer(model, config)
    else:
        raise UsageError(f"--model {model}: no config.json naming the tokenizer; pass --vocab.")
    if tokenizer.vocabulary_size != backbone.vocabulary_size:
        raise UsageError(f"The tokenizer has {tokenizer.vocabulary_size} tokens but the model's "
                         f"vocabulary has {backbone.vocabulary_size}.")
    return lm, tokenizer, path


def encode_prompt(tokenizer, prompt):
    """[start id] + the prompt's pieces (a list of ints)."""
    pieces = tokenizer.tokenize_ids(prompt).numpy().tolist()
    return [int(tokenizer.cls_id)] + pieces


def decode_tokens(tokenizer, ids):
    """Generated ids -> text (special tokens dropped)."""
    special = {int(tokenizer.cls_id), int(tokenizer.sep_id), int(tokenizer.pad_id)}
    ids = [i for i in ids if i not in special]
    if not ids:
        return ""
    import tensorflow as tf

    text = tokenizer.detokenize(tf.constant([ids], tf.int32))[0].numpy()
    return text.decode("utf-8", errors="replace")


def generate_text(lm, tokenizer, prompt, **options):
    """The completion (text after the prompt) of one prompt; `options` are
    `CausalLM.generate`'s."""
    ids = encode_prompt(tokenizer, prompt)
    new = lm.generate(ids, end_token_id=int(tokenizer.sep_id), **options)
    return decode_tokens(tokenizer, new)


def add_arguments(parser):
    add = parser.add_argument
    add("--model", required=True, metavar="RUN",
        help="A GPT pretraining run (RUN/pretrainer.keras), a GPT fine-tuning directory, "
        "or a .keras file.")
    add("--prompt", required=True, action="append",
        help="Text to continue (repeat for several prompts).")
    add("--vocab", default=None,
        help="Tokenizer files (default: the ones the run names in config.json).")
    add("--max-new-tokens", type=int, default=32)
    add("--strategy", choices=("greedy", "top_k", "top_p"), default="greedy")
    add("--top-k", type=int, default=50, help="Candidates for --strategy top_k.")
    add("--top-p", type=float, default=0.9, help="Probability mass for --strategy top_p.")
    add("--temperature", type=float, default=1.0,
        help="Divides the logits before sampling (not used by greedy).")
    add("--seed", type=int, default=None, help="Sampling seed (same seed, same text).")
    return parser


def run(args):
    from kerasbert.tasks.causal_lm import check_sampling

    try:
        check_sampling(args.strategy, args.top_k, args.top_p, args.temperature)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if args.max_new_tokens < 1:
        raise UsageError(f"--max-new-tokens must be >= 1, got {args.max_new_tokens}.")
    lm, tokenizer, _ = load_generator(args.model, args.vocab)
    for prompt in args.prompt:
        try:
            completion = generate_text(
                lm, tokenizer, prompt, max_new_tokens=args.max_new_tokens,
                strategy=args.strategy, top_k=args.top_k, top_p=args.top_p,
                temperature=args.temperature, seed=args.seed)
        except ValueError as err:
            raise UsageError(str(err)) from None
        print(completion)


def register(subparsers):
    """Adds `generate` to the `kerasbert` sub-command parsers."""
    parser = subparsers.add_parser(
        "generate",
        help="Continue a prompt with a GPT run (greedy, top-k, top-p, temperature).",
        description="Prints each prompt's completion (the generated text only).",
    )
    add_arguments(parser)
    parser.set_defaults(func=run)
    return parser
