"""Task metrics: GLUE, SQuAD EM/F1, seqeval."""
