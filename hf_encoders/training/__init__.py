"""`hf-encoders pretrain` on Trainer: a recipe per method (recipes/), the run's arguments, callbacks and outputs
(cards, loss curves, Hub branches, resumption), and the conversions that start a run from another checkpoint.

Deliberately empty: `pretrain.py` imports Trainer and datasets, so each module is imported by its own path, and
only when it is used (the package's public names are re-exported, lazily, by `hf_encoders`).
"""
