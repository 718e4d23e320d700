"""Model cards: `model_cards/<method>.md` (Jinja, huggingface_hub's ModelCard) rendered next to the weights."""

import statistics
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from huggingface_hub import ModelCard, ModelCardData
from transformers import TrainerState

from .diagnostics import collapse
from .loss_curves import loss_series

EMBEDDED_CORPUS = "English prose embedded from Python's standard library documentation"


def card_templates() -> Traversable:
    """The repository's top folder model_cards/: in a checkout (an editable install, or imported through PYTHONPATH)
    that folder itself, beside the package's; installed from a wheel, the package data `hf_encoders.model_cards`.
    The checkout's own comes first, so that a checkout imported through PYTHONPATH never renders the cards of another
    one that the environment has installed."""
    checkout = Path(__file__).resolve().parents[2] / "model_cards"
    return checkout if checkout.is_dir() else resources.files("hf_encoders.model_cards")


TEMPLATES = card_templates()


def hub_reference(name: str | None) -> str | None:
    """Card metadata may only name Hub repositories, never a local path or the embedded corpus."""
    if name is None or name == "embedded" or Path(name).exists():
        return None
    return name


def training_summary(state: TrainerState, tokens_per_step: int | None = None) -> str:
    lines = [f"- optimizer steps: {state.global_step}"]
    if tokens_per_step:
        lines.append(f"- tokens seen: about {state.global_step * tokens_per_step:,}")
    for evaluation in (False, True):
        for term, (steps, values) in loss_series(state.log_history, evaluation).items():
            name = f"validation {term.removeprefix('eval_')}" if evaluation else term
            lines.append(f"- final {name.replace('_', ' ')}: {values[-1]:.4f} (step {steps[-1]})")
    probes = [entry for entry in state.log_history if "effective_rank" in entry]
    if probes and (symptoms := collapse(probes[-1])):
        lines.append(
            f"- representation collapse at step {probes[-1]['step']}, in the top layer: {symptoms}; a lower learning "
            "rate or a longer warm-up may avoid it"
        )
    perplexities = [entry for entry in state.log_history if "eval_perplexity" in entry]
    if perplexities:
        last = perplexities[-1]
        lines.append(f"- final validation perplexity: {last['eval_perplexity']:.2f} (step {last['step']})")
    for measure, label, shown in (
        ("tokens_per_second", "real tokens per second", "{:,.0f}"),
        ("mfu", "model FLOPs utilisation", "{:.3f}"),
    ):
        values = [entry[measure] for entry in state.log_history if measure in entry]
        if values:
            lines.append(f"- {label} (median of the logs): {shown.format(statistics.median(values))}")
    return "\n".join(lines)


def model_lines(encoder, model, tokenizer) -> list[str]:
    """The card's size lines: the parameters of the encoder fine-tuning loads (and of the whole pre-training model,
    where it holds more: TaCL's teacher), and the vocabulary (with the embedding rows, where padded beyond it)."""
    size = f"- model size: {encoder.num_parameters():,} parameters"
    if model is not encoder:
        size += f" in the encoder ({model.num_parameters():,} in the model pre-trained)"
    vocabulary = f"- vocabulary: {len(tokenizer):,} tokens"
    if encoder.config.vocab_size > len(tokenizer):
        vocabulary += f" ({encoder.config.vocab_size:,} embedding rows)"
    return [size, vocabulary]


def schedule_line(training_args, state: TrainerState) -> str:
    """The learning rate, its schedule and warm-up, as Trainer ran them."""
    steps = state.max_steps or state.global_step
    warmup = training_args.get_warmup_steps(steps) if steps else 0
    schedule = getattr(training_args.lr_scheduler_type, "value", training_args.lr_scheduler_type)
    return (
        f"- learning rate: peak {training_args.learning_rate:g}, {schedule} schedule over {steps:,} steps after "
        f"{warmup:,} warm-up steps; weight decay {training_args.weight_decay:g}"
    )


def mfu_line(state: TrainerState) -> list[str]:
    """Where throughput was logged but no MFU: why not (the device's peak is unknown), and how to get it."""
    logged = [entry for entry in state.log_history if "tokens_per_second" in entry]
    if not logged or any("mfu" in entry for entry in logged):
        return []
    return ["- model FLOPs utilisation: not measured, the device's peak is unknown (pass --peak_tflops to measure it)"]


def write_model_card(
    output_dir: Path,
    state: TrainerState,
    *,
    recipe,
    args,
    tokens_per_step: int | None = None,
    model_id: str | None = None,
    template: str | None = None,
    pipeline_tag: str | None = None,
    subfolder: str | None = None,
    corpus_report=None,
    run_lines: list[str] = (),
    note: str | None = None,
    training_args=None,
    model_facts: list[str] | None = None,
) -> Path:
    """README.md in `output_dir`, from `model_cards/<template>.md` (default: the method's card).

    `model_id` is the Hub repository the usage snippets name (default: the folder's name, or with `subfolder` its
    parent's); `subfolder` is where the folder sits inside that repository or parent (TaCL's student).
    `pipeline_tag` defaults to the recipe's. `corpus_report` (data/corpus_report.py) adds the mixture's sources,
    weights and realised shares, the documents read and the bad rows skipped; `training_args` the learning rate and
    schedule; `model_facts` the model's size lines (`model_lines`); `run_lines` what else the summary says of the run
    (the preset it used and what it overrode). `note` is a first line of the training summary that says what the
    folder's weights are, where they are not the last step's (`ema/`: the moving average).
    """
    sources = [args.corpus] if corpus_report is None else [source.name for source in corpus_report.sources]
    corpus_lines = [] if corpus_report is None else corpus_report.lines()
    folder = Path(output_dir)
    card_data = ModelCardData(
        library_name="transformers",
        license="apache-2.0",
        tags=["hf-encoders", recipe.name],
        pipeline_tag=pipeline_tag or recipe.pipeline_tag,
        base_model=hub_reference(args.starting_checkpoint or args.init_from_smaller),
        datasets=[name for name in map(hub_reference, sources) if name] or None,
    )
    card = ModelCard.from_template(
        card_data,
        template_str=(TEMPLATES / f"{template or recipe.method.card_template}.md").read_text(encoding="utf-8"),
        model_id=model_id or (folder.parent if subfolder else folder).name,
        subfolder=subfolder,
        on_hub=model_id is not None,
        corpus=", ".join(EMBEDDED_CORPUS if name in (None, "embedded") else name for name in sources),
        training_summary="\n".join(
            [
                *([note] if note else []),
                training_summary(state, tokens_per_step),
                *mfu_line(state),
                *(model_facts or []),
                *([schedule_line(training_args, state)] if training_args is not None else []),
                *recipe.summary_lines(args),
                *run_lines,
                *corpus_lines,
            ]
        ),
        **recipe.card_variables(args),
    )
    path = folder / "README.md"
    card.save(path)
    return path
