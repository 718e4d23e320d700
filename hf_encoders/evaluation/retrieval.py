"""One retrieval (IR) run of the protocol of Gisserot-Boukhlef et al. (2025): InfoNCE with in-batch negatives on
mean pooling, through sentence-transformers (the `retrieval` extra).

Every checkpoint is embedded the same way, whatever configuration it carries: the mean of its last hidden states over
real tokens, so models are compared on one pooling, the paper's. Training is `MultipleNegativesRankingLoss`
(each query against every positive of its batch, and every hard negative where the task has a `negative` column),
on batches without duplicate texts, for which an in-batch "negative" would be a positive. Evaluation ranks
all of a split's passages (positives and negatives) for each of its queries with `InformationRetrievalEvaluator`.
"""

from pathlib import Path

from transformers import set_seed

from .finetune import RunSettings, protocol_arguments
from .tasks import Task

# What a run reports, as sentence-transformers names them after the similarity's prefix. With one positive per query
# (MS MARCO's triples), recall@k is the share of queries whose positive is in the top k.
METRICS = ("mrr@10", "ndcg@10", "map@100", "recall@1", "recall@10")
SIMILARITY = "cosine"
# How every checkpoint is embedded for ir tasks, in words for the report.
RETRIEVAL_POOLING = "mean of the last hidden states over real tokens, cosine similarity (sentence-transformers)"


def import_sentence_transformers():
    try:
        import sentence_transformers
    except ImportError as error:
        raise ImportError(
            'Retrieval tasks (ir:...) run on sentence-transformers: pip install "hf-encoders[retrieval]"'
        ) from error
    return sentence_transformers


def mean_pooling_model(model_path: str, max_length: int, trust_remote_code: bool):
    """A SentenceTransformer of the checkpoint's base model (AutoModel) and mean pooling, cosine similarity. Inputs
    are cut at `max_length` tokens, or sooner where the tokenizer or the position table ends."""
    st = import_sentence_transformers()
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    trust = {"trust_remote_code": trust_remote_code}
    transformer = Transformer(model_path, model_kwargs=trust, processor_kwargs=trust, config_kwargs=trust)
    transformer.max_seq_length = min(max_length, transformer.max_seq_length)  # its own: both limits already
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    return st.SentenceTransformer(modules=[transformer, pooling], similarity_fn_name=SIMILARITY)


def training_pairs(task: Task):
    """(query, positive[, negative]) in that order: the loss reads columns by position, the anchor first."""
    columns = [column for column in ("query", "positive", "negative") if column in task.train.column_names]
    return task.train.select_columns(columns)


def evaluator_for(split, name: str, batch_size: int):
    """Each distinct query against every distinct passage of the split; its relevant passages are its positives."""
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator

    passages = {}  # text -> id, in first-seen order
    query_ids, relevant = {}, {}
    for row in split:
        for text in (row["positive"], row.get("negative")):
            if text is not None:
                passages.setdefault(text, f"p{len(passages)}")
        query_id = query_ids.setdefault(row["query"], f"q{len(query_ids)}")
        relevant.setdefault(query_id, set()).add(passages[row["positive"]])
    return InformationRetrievalEvaluator(
        queries={query_id: query for query, query_id in query_ids.items()},
        corpus={passage_id: text for text, passage_id in passages.items()},
        relevant_docs=relevant,
        mrr_at_k=[10],
        ndcg_at_k=[10],
        accuracy_at_k=[1],
        precision_recall_at_k=[1, 10],
        map_at_k=[100],
        batch_size=batch_size,
        name=name,
        write_csv=False,
    )


def retrieval_metrics(model, split, name: str, batch_size: int) -> dict[str, float]:
    scores = evaluator_for(split, name, batch_size)(model)
    prefix = f"{name}_{SIMILARITY}_"
    return {metric: float(scores[prefix + metric]) for metric in METRICS}


def fine_tune_retrieval(model_path: str, task: Task, settings: RunSettings, output_dir: Path) -> dict:
    """Fine-tune `model_path` on an ir task once; the model is saved in `output_dir`.

    Returns {"steps": optimizer steps, "validation": {metric: value}, "test": {...} (when the task has a test split)}.
    Steps are `settings.max_steps` or one epoch of the training pairs, whichever is fewer.
    """
    if task.kind != "ir":
        raise ValueError(f"fine_tune_retrieval runs ir tasks; {task.kind} tasks run through fine_tune.")
    st = import_sentence_transformers()
    from sentence_transformers.base.sampler import BatchSamplers
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    train = training_pairs(task)
    steps = settings.steps_for(len(train))
    set_seed(settings.seed)
    model = mean_pooling_model(model_path, settings.max_length, settings.trust_remote_code)
    protocol = protocol_arguments(settings, steps, output_dir)
    # In-batch negatives: a text twice in a batch would be a "negative" that is a positive.
    protocol["batch_sampler"] = BatchSamplers.NO_DUPLICATES
    args = st.SentenceTransformerTrainingArguments(**{**protocol, **settings.training_overrides})
    loss = MultipleNegativesRankingLoss(model)
    trainer = st.SentenceTransformerTrainer(model=model, args=args, train_dataset=train, loss=loss)
    trainer.train()
    model.save(str(output_dir), create_model_card=False)
    metrics = {
        "steps": trainer.state.global_step,
        "validation": retrieval_metrics(model, task.validation, "validation", settings.batch_size),
    }
    if task.test is not None:
        metrics["test"] = retrieval_metrics(model, task.test, "test", settings.batch_size)
    return metrics
