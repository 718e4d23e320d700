"""The sentence-transformers configuration every encoder folder `hf-encoders pretrain` writes carries, so that
`SentenceTransformer(folder, trust_remote_code=True)` embeds with the method's pooling instead of guessing one.

Plain JSON in the layout sentence-transformers 6.2 saves (modules.json, sentence_bert_config.json, 1_Pooling/,
config_sentence_transformers.json): writing it needs no sentence-transformers, only loading it does (the `retrieval`
extra).

Every method pools by the mean of the last hidden states over real tokens:
- biphasic: Gisserot-Boukhlef et al. (2025) fine-tune and evaluate their encoders on mean pooling (SC and IR alike);
- MAE-LM and the MLM baseline: they train no sentence-level token ([CLS] gets no objective of its own), so the mean
  is the embedding that uses what pre-training taught, and it is what the IR protocol of `hf-encoders evaluate`
  trains on, keeping every method comparable;
- TaCL: its token-level contrastive objective shapes every token's representation, not [CLS]; the NSP head, where
  there is one, trains the pooler, which is a classifier's input, not a retrieval embedding.
"""

import json
from pathlib import Path

from transformers import PreTrainedModel

# Module classes as sentence-transformers 6.2 names them in modules.json.
TRANSFORMER_MODULE = "sentence_transformers.base.modules.transformer.Transformer"
POOLING_MODULE = "sentence_transformers.sentence_transformer.modules.pooling.Pooling"
POOLING_FOLDER = "1_Pooling"


def write_sentence_transformers_config(
    folder: str | Path, model: PreTrainedModel, pooling: str = "mean", max_seq_length: int | None = None
) -> None:
    """Write the configuration next to `model`'s saved weights in `folder` (whose base model is what
    sentence-transformers loads, through AutoModel). `max_seq_length`: the longest input to embed; None leaves
    sentence-transformers' own limit (the tokenizer's, capped at the model's position table)."""
    folder = Path(folder)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": TRANSFORMER_MODULE},
        {"idx": 1, "name": "1", "path": POOLING_FOLDER, "type": POOLING_MODULE},
    ]
    transformer = {
        "transformer_task": "feature-extraction",
        "modality_config": {"text": {"method": "forward", "method_output_name": "last_hidden_state"}},
        "module_output_name": "token_embeddings",
    }
    if max_seq_length is not None:
        transformer["max_seq_length"] = max_seq_length
    if getattr(model.base_model, "pooler", False) is None:
        # A masked LM built without the pooler (BertForMaskedLM, RobertaForMaskedLM): AutoModel would add one with
        # random weights, which mean pooling never reads but transformers reports as missing.
        transformer["model_kwargs"] = {"add_pooling_layer": False}
    pooling_config = {"embedding_dimension": model.config.hidden_size, "pooling_mode": pooling, "include_prompt": True}
    # cosine: the similarity MultipleNegativesRankingLoss and the retrieval evaluation of `hf-encoders evaluate` use.
    model_config = {"model_type": "SentenceTransformer", "similarity_fn_name": "cosine"}
    (folder / POOLING_FOLDER).mkdir(parents=True, exist_ok=True)
    for name, content in (
        ("modules.json", modules),
        ("sentence_bert_config.json", transformer),
        (f"{POOLING_FOLDER}/config.json", pooling_config),
        ("config_sentence_transformers.json", model_config),
    ):
        (folder / name).write_text(json.dumps(content, indent=2) + "\n")
