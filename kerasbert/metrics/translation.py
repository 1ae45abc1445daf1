"""Corpus BLEU of generated text, through sacreBLEU (the field's reference
implementation: its 13a tokenization, brevity penalty and smoothing), so a
score here is the number `sacrebleu` prints for the same files.

sacreBLEU is imported on the first call (importing `kerasbert.metrics`
stays light).
"""


def bleu(predictions, references, lowercase=False):
    """Corpus BLEU in [0, 100] (sacreBLEU's default scale, not a fraction).

    Args:
        predictions: list of str, the detokenized outputs (one per example).
        references: list of str (one reference each) or a list of lists of
            str (several references each, the same count for every example).
        lowercase: compare case-insensitively (for uncased tokenizers, whose
            outputs are lower case).

    Returns:
        float. An empty corpus raises ValueError.
    """
    import sacrebleu  # lazy: sacrebleu loads on first use

    predictions = [str(p) for p in predictions]
    if not predictions:
        raise ValueError("bleu: predictions is empty.")
    if references and isinstance(references[0], (list, tuple)):
        streams = [list(stream) for stream in zip(*references)]
        if any(len(refs) != len(streams) for refs in references):
            raise ValueError("bleu: every example needs the same number of references.")
    else:
        streams = [list(references)]
    if any(len(stream) != len(predictions) for stream in streams):
        raise ValueError(f"bleu: {len(predictions)} predictions but {len(streams[0])} "
                         "references.")
    score = sacrebleu.corpus_bleu(predictions, [[str(r) for r in s] for s in streams],
                                  lowercase=bool(lowercase))
    return float(score.score)
