"""The papers' representation diagnostics for any encoder Transformers loads.

- `self_similarity`, `similarity_matrix`: TaCL Eq. 3 and Fig. 3, token cosines within a sentence.
- `effective_rank`: MAE-LM's tau-effective rank (Sec. 2.2).
- `isotropy`: the mean cosine across sentences, the baseline that self-similarity is read against.
- `layerwise_report`: all of them for every layer of a model, streamed over a corpus, with and
  without [MASK] in the input (MAE-LM Fig. 1a-b); `plot_layer_curves` and `plot_similarity_heatmap`
  draw the papers' figures. `hf-encoders analyze` runs it all from the command line.
- `token_counts`, `unigram_entropy`: the unigram plateau a masked-LM loss is read against.
- `plot_training_diagnostics`: the same diagnostics over the steps of a run (`hf-encoders pretrain
  --diagnostics_steps`).
"""

from .isotropy import isotropy
from .plots import plot_layer_curves, plot_similarity_heatmap, plot_training_diagnostics
from .rank import effective_rank
from .report import LayerwiseReport, layerwise_report, token_similarity_matrix
from .similarity import self_similarity, similarity_matrix
from .unigram import token_counts, unigram_entropy

__all__ = [
    "LayerwiseReport",
    "effective_rank",
    "isotropy",
    "layerwise_report",
    "plot_layer_curves",
    "plot_similarity_heatmap",
    "plot_training_diagnostics",
    "self_similarity",
    "similarity_matrix",
    "token_counts",
    "token_similarity_matrix",
    "unigram_entropy",
]
