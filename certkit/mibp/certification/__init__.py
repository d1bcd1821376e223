"""Results and certification: the per-epoch boxes of `certified_training`, certified predictions, epoch
selection,
and the attacks and random cases of the soundness checks."""
