"""Where the files of a model handle are on this machine.

A handle names a model's files wherever they live:

    hf://OWNER/NAME[@REVISION]            the Hugging Face Hub (huggingface_hub)
    kaggle://OWNER/MODEL/keras/VARIANT[/VERSION]   Kaggle Models (kagglehub)
    a local path                          a directory or a file

`local_path(handle)` downloads what is not cached yet through the library made
for the source (its cache, progress bars, tokens and offline switches:
`HF_HUB_OFFLINE`, `HF_HUB_CACHE`, `HF_TOKEN`, `KAGGLEHUB_CACHE`,
`KAGGLE_USERNAME`/`KAGGLE_KEY`) and returns the local directory. What the
files are (a Hugging Face model, a keras-hub preset, a TF1 checkpoint, ...)
is decided by the loaders above this module; this one only finds files.
"""

import os

from kerasbert.errors import UsageError

HF_SCHEME = "hf://"
KAGGLE_SCHEME = "kaggle://"

#: What a Hugging Face snapshot fetches: configuration, safetensors weights,
#: tokenizer files and a sentence-transformers model's pooling files
#: (`kerasbert.sources.sentence_transformers`). Never `*.bin` (pickles are not
#: loaded, so not fetched).
HF_PATTERNS = (
    "config.json", "*.safetensors", "model.safetensors.index.json", "tokenizer.json",
    "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "vocab.json",
    "merges.txt", "spiece.model", "sentencepiece.bpe.model", "generation_config.json",
    "modules.json", "sentence_bert_config.json", "*Pooling/config.json",
)


class HandleError(UsageError, ValueError):
    """A handle that cannot be found or fetched; the message says why and
    what to do instead.

    Example:

    >>> from kerasbert.sources import HandleError, resolve
    >>> resolve("hf://bert-base-uncased")                     # no OWNER/: refused at once
    Traceback (most recent call last):
    ...
    kerasbert.sources.handles.HandleError: hf://bert-base-uncased: a Hugging Face handle is ...
    >>> issubclass(HandleError, ValueError)                  # and a UsageError for the CLI
    True
    """


def is_remote(handle):
    return isinstance(handle, str) and handle.startswith((HF_SCHEME, KAGGLE_SCHEME))


def parse_hf(handle):
    """"hf://OWNER/NAME@REV" -> ("OWNER/NAME", "REV" or None)."""
    body = handle[len(HF_SCHEME):]
    repo_id, _, revision = body.partition("@")
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise HandleError(f"{handle}: a Hugging Face handle is hf://OWNER/NAME[@REVISION], "
                          "e.g. hf://google-bert/bert-base-uncased.")
    return repo_id, revision or None


def parse_kaggle(handle):
    """"kaggle://OWNER/MODEL/keras/VARIANT[/VERSION]" -> "OWNER/MODEL/keras/VARIANT[/VERSION]"
    (kagglehub's own handle)."""
    body = handle[len(KAGGLE_SCHEME):].strip("/")
    parts = body.split("/")
    if len(parts) not in (4, 5) or not all(parts) or (len(parts) == 5 and not parts[4].isdigit()):
        raise HandleError(f"{handle}: a Kaggle handle is kaggle://OWNER/MODEL/FRAMEWORK/VARIANT"
                          "[/VERSION], e.g. kaggle://keras/bert/keras/bert_base_en_uncased/2.")
    return body


def local_path(handle):
    """The local file or directory `handle` stands for, downloading it
    into the source's cache first if needed.

    Raises:
        HandleError: a malformed handle, a repository or revision that does
            not exist, no network for a handle that is not cached (the
            message lists the offline alternatives), or a local path that
            does not exist.
    """
    handle = os.fspath(handle)
    if handle.startswith(HF_SCHEME):
        return _hf_snapshot(handle)
    if handle.startswith(KAGGLE_SCHEME):
        return _kaggle_download(handle)
    if not os.path.exists(handle):
        raise HandleError(f"{handle}: no such file or directory, and not a built-in preset, "
                          "hf://OWNER/NAME or kaggle://OWNER/MODEL/keras/VARIANT handle.")
    return handle


def _hf_snapshot(handle):
    # lazy: huggingface_hub is only needed for hf:// handles
    import huggingface_hub
    from huggingface_hub import errors

    repo_id, revision = parse_hf(handle)
    try:
        return huggingface_hub.snapshot_download(repo_id, revision=revision,
                                                 allow_patterns=list(HF_PATTERNS))
    except errors.LocalEntryNotFoundError:
        raise HandleError(_offline_message(handle, "the Hugging Face cache "
                                           f"({huggingface_hub.constants.HF_HUB_CACHE})")) from None
    except errors.GatedRepoError:
        raise HandleError(f"{handle}: the repository is gated; accept its terms on "
                          f"huggingface.co/{repo_id} and log in (`hf auth login` or HF_TOKEN)."
                          ) from None
    except errors.RepositoryNotFoundError:
        raise HandleError(f"{handle}: no such repository on the Hugging Face Hub (or it is "
                          "private: log in with `hf auth login` or HF_TOKEN).") from None
    except errors.RevisionNotFoundError:
        raise HandleError(f"{handle}: revision {revision!r} does not exist in {repo_id}."
                          ) from None
    except errors.HFValidationError as err:
        raise HandleError(f"{handle}: {err}") from None
    except (OSError, errors.HfHubHTTPError) as err:
        raise HandleError(f"{handle}: download failed ({type(err).__name__}: "
                          f"{str(err).splitlines()[0] if str(err) else ''}).") from None


def _kaggle_download(handle):
    # lazy: kagglehub is only needed for kaggle:// handles
    import kagglehub

    body = parse_kaggle(handle)
    try:
        return kagglehub.model_download(body)
    except Exception as err:  # kagglehub raises requests', its own and OS errors
        cached = _kaggle_cached_versions(body)
        if cached and body.count("/") == 3:
            raise HandleError(
                f"{handle}: finding the latest version needs kaggle.com ({type(err).__name__}); "
                f"versions in the cache: {', '.join(map(str, cached))}. Pin one: "
                f"{handle.rstrip('/')}/{cached[-1]}.") from None
        if _is_network_error(err):
            raise HandleError(_offline_message(handle, "the kagglehub cache "
                                               f"({_kaggle_cache_root()})")) from None
        raise HandleError(f"{handle}: {type(err).__name__}: "
                          f"{str(err).splitlines()[0] if str(err) else 'download failed'}"
                          ) from None


def _kaggle_cache_root():
    return os.environ.get("KAGGLEHUB_CACHE",
                          os.path.join(os.path.expanduser("~"), ".cache", "kagglehub"))


def _kaggle_cached_versions(body):
    """Complete versions of an unversioned Kaggle handle in the cache."""
    owner, model, framework, variant = body.split("/")[:4]
    folder = os.path.join(_kaggle_cache_root(), "models", owner, model, framework, variant)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(int(n.removesuffix(".complete")) for n in names
                  if n.endswith(".complete") and n.removesuffix(".complete").isdigit())


def _is_network_error(err):
    names = {cls.__name__ for cls in type(err).__mro__}
    return bool(names & {"ConnectionError", "Timeout", "ConnectTimeout", "OfflineModeIsEnabled",
                         "NameResolutionError", "MaxRetryError", "UnauthenticatedError"})


def _offline_message(handle, cache):
    return (f"{handle} is not in {cache} and it could not be downloaded (no network, or "
            "offline mode). Offline alternatives: download it once where there is network "
            "and copy the cache; pass a local directory holding the model's files; or pin "
            "a revision/version that is cached.")
