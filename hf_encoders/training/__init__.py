"""`hf-encoders pretrain` on Trainer, the machinery every method shares: the `Recipe` base (recipe.py; each method's
own is in methods/<name>/recipe.py), the run's arguments, the trainer, callbacks and outputs (cards, loss curves, Hub
branches, resumption).

Deliberately empty: `pretrain.py` imports Trainer and datasets, so each module is imported by its own path, and
only when it is used (the package's public names are re-exported, lazily, by `hf_encoders`).
"""
