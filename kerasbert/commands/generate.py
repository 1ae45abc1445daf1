"""`kerasbert generate`: continue a prompt with a GPT run.

    kerasbert generate --model RUN_OR_HANDLE --prompt "The cat" [--max-new-tokens 32]
        [--strategy greedy|top_k|top_p] [--top-k 50] [--top-p 0.9]
        [--temperature 1.0] [--seed N] [--vocab PATH]

RUN and the prompt's encoding: `kerasbert.loading.generation`.
"""

from kerasbert.commands._args import positive_int
from kerasbert.errors import UsageError

NAME = "generate"
HELP = "Continue a prompt with a GPT run (greedy, top-k, top-p, temperature)."
DESCRIPTION = "Prints each prompt's completion (the generated text only)."


def add_arguments(parser):
    add = parser.add_argument
    add("--model", required=True, metavar="RUN_OR_HANDLE",
        help="A GPT pretraining run (RUN/pretrainer.keras), a GPT fine-tuning directory, "
        "a .keras file, or a published GPT checkpoint (hf://openai-community/openai-gpt "
        "or its directory; its own tokenizer).")
    add("--prompt", required=True, action="append",
        help="Text to continue (repeat for several prompts).")
    add("--vocab", default=None,
        help="Tokenizer files (default: the ones the run names in config.json, or the "
        "checkpoint's own).")
    add("--max-new-tokens", type=positive_int, default=None,
        help="Tokens to add at most (default 32; fewer than the model's positions, and "
        "generation also stops when the prompt and its completion fill them).")
    add("--strategy", choices=("greedy", "top_k", "top_p"), default="greedy")
    add("--top-k", type=positive_int, default=50, help="Candidates for --strategy top_k.")
    add("--top-p", type=float, default=0.9, help="Probability mass for --strategy top_p.")
    add("--temperature", type=float, default=1.0,
        help="Divides the logits before sampling (not used by greedy).")
    add("--seed", type=int, default=None, help="Sampling seed (same seed, same text).")
    return parser


def run(args):
    # lazy: tensorflow (`kerasbert --help` imports this module)
    from kerasbert.decoding import check_sampling
    from kerasbert.loading.generation import generate_text, load_generator

    try:
        check_sampling(args.strategy, args.top_k, args.top_p, args.temperature)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if args.max_new_tokens is not None and args.max_new_tokens < 1:
        raise UsageError(f"--max-new-tokens must be >= 1, got {args.max_new_tokens}.")
    lm, tokenizer, _ = load_generator(args.model, args.vocab)
    positions = int(lm.backbone.max_sequence_length)
    if args.max_new_tokens is None:
        args.max_new_tokens = min(32, positions - 1)
    elif args.max_new_tokens > positions - 1:
        raise UsageError(f"--max-new-tokens {args.max_new_tokens} is more than the model's "
                         f"{positions} positions leave after a prompt's first token (at most "
                         f"{positions - 1}).")
    for prompt in args.prompt:
        try:
            completion = generate_text(
                lm, tokenizer, prompt, max_new_tokens=args.max_new_tokens,
                strategy=args.strategy, top_k=args.top_k, top_p=args.top_p,
                temperature=args.temperature, seed=args.seed)
        except ValueError as err:
            raise UsageError(str(err)) from None
        print(completion)
