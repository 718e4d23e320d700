"""The options of `hf-encoders pretrain` that are not `TrainingArguments` (HfArgumentParser reads both)."""

from dataclasses import dataclass, field

from transformers import HfArgumentParser

from hf_encoders_cli import OneLineErrors

from ..data.masking_units import MASK_COUNTS, MASKING_UNITS
from ..data.token_cache import recorded_block_size
from ..methods import METHODS

# Tokens per example when neither --block_size nor a --tokenized_dir cache says.
DEFAULT_BLOCK_SIZE = 128

# Every recipe's SIZES table, in words (kept equal to them by a test; written out so that --help imports no model).
SIZES_HELP = "tiny 2 x 64, small 6 x 256, base 12 x 768 (the papers' base models)"
# TrainingArguments options whose own help does not say what `pretrain` does with them.
TRAINER_OPTION_HELP = {
    "output_dir": "Required. The folder the model, its code, tokenizer, card (README.md), loss_curve.png and "
    "checkpoint-N/ folders are written to. A folder holding another method's model is refused.",
    "resume_from_checkpoint": "true: continue from the last complete checkpoint-N in --output_dir, with the losses "
    "an uninterrupted run would have had; or the path of one checkpoint-N folder.",
}


class HfCommandParser(OneLineErrors, HfArgumentParser):
    """HfArgumentParser with hf-encoders' one-line errors (a mistyped flag's closest option, no usage dump)."""

    def parse_args_into_dataclasses(self, args=None, **kwargs):
        if kwargs.pop("return_remaining_strings", False):
            return super().parse_args_into_dataclasses(args, return_remaining_strings=True, **kwargs)
        *parsed, remaining = super().parse_args_into_dataclasses(args, return_remaining_strings=True, **kwargs)
        if remaining:  # HfArgumentParser's own refusal is a ValueError listing them, with no guess
            self.error(f"unrecognized arguments: {' '.join(remaining)}")
        return tuple(parsed)


@dataclass
class PretrainArguments:
    # Required unless --preset names the method (parse_arguments lifts the requirement then).
    method: str = field(
        metadata={"help": f"Pre-training method: {', '.join(METHODS)} (mlm is the plain BERT baseline)."}
    )
    preset: str | None = field(
        default=None,
        metadata={
            "help": "A paper's model size and training settings (hf-encoders plan --list names them; docs/"
            "reproducing.md): flags given override them, and are logged and named on the card. Without it, a model "
            "built from scratch with no --learning_rate, --warmup_steps or --lr_scheduler_type gets the small-run "
            "preset of its method and --model_size (e.g. mae_lm-tiny)."
        },
    )
    corpus: str | None = field(
        default=None,
        metadata={
            "help": "A .txt/.jsonl/.parquet file, a folder of them, or a datasets name. Default: English prose "
            "embedded from Python's own documentation (offline). A weighted mixture: SOURCE:WEIGHT items, comma-"
            "separated or one per --corpus flag (web.jsonl:0.7,books/:0.3; weights are relative, equal if left out).",
            "action": "append",  # a repeated flag adds a source; __post_init__ joins them with commas
        },
    )
    anneal_corpus: str | None = field(
        default=None,
        metadata={
            "help": "A second corpus (the --corpus syntax, e.g. a re-weighted mixture) that takes over for the last "
            "--anneal_fraction of max_steps: an annealing phase's data. Each phase's realised source shares are "
            "logged and written to the model card; --max_steps required."
        },
    )
    anneal_fraction: float | None = field(
        default=None, metadata={"help": "--anneal_corpus: the fraction of max_steps, at the end, it trains on."}
    )
    dataset_config: str | None = field(
        default=None, metadata={"help": "datasets configuration name, with --corpus NAME."}
    )
    text_column: str = field(
        default="text", metadata={"help": "Column holding the text in jsonl/parquet/datasets corpora."}
    )
    streaming: bool = field(
        default=False, metadata={"help": "Stream a datasets corpus instead of downloading it whole."}
    )
    skip_bad_rows: bool = field(
        default=False,
        metadata={
            "help": "Skip a malformed JSON Lines row (broken JSON, no text field, text not a string) instead of "
            "stopping at it; the count is logged and written to the model card."
        },
    )
    tokenized_dir: str | None = field(
        default=None,
        metadata={
            "help": "A token cache (hf-encoders tokenize) to train from, without tokenizing; if the folder holds none "
            "yet, the main process makes it from --corpus first. Refused if made with another tokenizer, block size "
            "or packing."
        },
    )
    max_documents: int | None = field(default=None, metadata={"help": "Use only the first N documents (quick runs)."})
    tokenizer_name: str | None = field(
        default=None,
        metadata={
            "help": "Tokenizer path; when absent, the tokenizer saved with the checkpoint a run continues "
            "(--model_name_or_path, --from_causal_lm, --resume_from_checkpoint), or from scratch a WordPiece tokenizer "
            "trained on the corpus."
        },
    )
    # None, not the default value, when left out: a run that trains no tokenizer refuses any value given.
    vocab_size: int | None = field(
        default=None, metadata={"help": "Vocabulary size of a tokenizer trained on the spot (default 8000)."}
    )
    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "A checkpoint to continue pre-training (run_mlm.py's meaning): the encoder TaCL continues "
            "(required for tacl), a checkpoint of the method's own model, or for mae_lm also a BERT/RoBERTa/XLM-R "
            "encoder to start from (its decoder new). Default: a new --model_size model."
        },
    )
    from_causal_lm: str | None = field(
        default=None,
        metadata={
            "help": "biphasic only: a Llama-family causal LM (folder, Hub name or .gguf file) converted to a biphasic "
            "encoder, then trained with MLM (the paper's CPT)."
        },
    )
    # None when left out, as vocab_size: a run that continues a checkpoint refuses any size given, tiny included.
    model_size: str | None = field(
        default=None,
        metadata={
            "help": f"Size preset of a model built from scratch, layers x width: {SIZES_HELP} (default tiny). MAE-LM "
            "adds a decoder 1/3 as deep (at least 1 layer)."
        },
    )
    init_from_smaller: str | None = field(
        default=None,
        metadata={
            "help": "mae_lm, biphasic: start the new --model_size / --config_overrides model from a smaller checkpoint "
            "of the method's model, whose widths it multiplies by one whole factor (depth and head size kept), tiled "
            "so that the new model's outputs at initialisation are the checkpoint's; its tokenizer is the run's."
        },
    )
    config_overrides: str | None = field(
        default=None,
        metadata={
            "help": "Comma-separated config fields overriding the preset, e.g. 'hidden_size=128,num_hidden_layers=4'."
        },
    )
    attn_implementation: str | None = field(
        default=None,
        metadata={
            "help": "The model's attention implementation (from_pretrained's attn_implementation): sdpa (the "
            "default; for mae_lm on a CUDA GPU, flex_attention), eager, flex_attention, or flash_attention_2 for "
            "biphasic and a TaCL student whose model has it. MAE-LM refuses flash attention: its relative position "
            "bias cannot enter flash kernels; on flex_attention it trains without attention dropout."
        },
    )
    pad_vocab_to_multiple_of: int | None = field(
        default=None,
        metadata={
            "help": "Pad the vocabulary of a model built from scratch (its embeddings and output layer, not the "
            "tokenizer) to a multiple of N, as resize_token_embeddings(pad_to_multiple_of=N) does. Default: 64 on a "
            "CUDA GPU, 1 (none) elsewhere."
        },
    )
    fp8: bool = field(
        default=False,
        metadata={
            "help": "FP8 matmuls (accelerate's torchao backend: the linear layers but the first and last in FP8, the "
            "rest in bf16), on GPUs with FP8 tensor cores (H100, H200). Needs pip install 'hf-encoders[fp8]'."
        },
    )
    block_size: int | None = field(
        default=None,
        metadata={
            "help": f"Tokens per training example (default {DEFAULT_BLOCK_SIZE}; with pretrain --tokenized_dir, the "
            "cache's block size)."
        },
    )
    block_size_schedule: str | None = field(
        default=None,
        metadata={
            "help": "Block length by phase, LENGTH:FRACTION[:ROPE_THETA] of max_steps in order, the fractions summing "
            "to 1 (e.g. 128:0.9,512:0.1:160000: context extension, biphasic with a larger RoPE θ). Each phase packs "
            "the documents after those the previous one read; --max_steps required; the model's positions cover the "
            "longest block, and validation uses it. Replaces --block_size."
        },
    )
    mlm_probability: float | None = field(default=None, metadata={"help": "Masking ratio (default: the method's own)."})
    mlm_probability_schedule: str | None = field(
        default=None,
        metadata={
            "help": "Masking ratio by phase, RATE:FRACTION of max_steps in order, the fractions summing to 1 (e.g. "
            "0.3:0.9,0.15:0.1: an annealing phase at a lower ratio). Each batch is masked at every rate named and "
            "trained with the rate of its step, logged as mlm_probability; evaluation masks at the last rate. "
            "Replaces --mlm_probability."
        },
    )
    batch_size_warmup_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Grow the batch linearly over the first N tokens trained on, from one micro-batch to "
            "--gradient_accumulation_steps of them (each micro-batch keeps its shape); the micro-batches a warm-up "
            "step leaves out are read and not trained on. Logged as batch_size (sequences per step)."
        },
    )
    masking: str = field(
        default="token",
        metadata={
            "help": "What is masked as one unit: token (BERT), whole_word (every sub-token of a word, from the fast "
            "tokenizer's word ids) or span (SpanBERT: Geometric(--span_geometric_p) words, at most "
            "--max_span_length). The ratio is met in tokens either way.",
            "choices": list(MASKING_UNITS),
        },
    )
    mask_count: str = field(
        default="exact",
        metadata={
            "help": "How many tokens a row masks: exact (floor(ratio x maskable tokens + u), u uniform in [0, 1): "
            "BERT's and fairseq's rule, which keeps a step's shapes fixed) or per_token (a coin per token, per word "
            "with --masking whole_word, as transformers' DataCollatorForLanguageModeling draws). Spans meet the "
            "count either way.",
            "choices": list(MASK_COUNTS),
        },
    )
    max_span_length: int = field(default=10, metadata={"help": "--masking span: the longest span, in words."})
    span_geometric_p: float = field(
        default=0.2, metadata={"help": "--masking span: p of the geometric span length (0.2: 3.8 words on average)."}
    )
    mask_in_encoder_fraction: float = field(
        default=0.0,
        metadata={
            "help": "mae_lm: δ, the share of [MASK]s (decided per --masking unit) that stays in the encoder input. 0 "
            "is MAE-LM (the paper's default), 1 is standard MLM with a decoder."
        },
    )
    hold_encoder_steps: int | None = field(
        default=None,
        metadata={
            "help": "mae_lm from a pretrained encoder: hold the encoder (all but the word embeddings the LM head "
            "shares) still for the first N steps, while the fresh decoder learns to read it; without it, a fresh "
            "decoder can pull the encoder's states onto one vector (experiments/REPORT.md)."
        },
    )
    pack_documents: bool = field(
        default=False,
        metadata={
            "help": "mae_lm, biphasic: give every document its own positions inside a block (position_ids restart "
            "at 0) and keep attention within it; without it, documents joined in a block attend to each other."
        },
    )
    phases: str | None = field(
        default=None,
        metadata={
            "help": "biphasic: objective:fraction of max_steps, in order. Default: clm:0.25,mlm:0.75 from "
            "scratch (PFS), mlm:1.0 from a checkpoint or a causal LM (CPT)."
        },
    )
    tacl_temperature: float | None = field(
        default=None,
        metadata={
            "help": "tacl: τ of the token-aware contrastive loss (TaclConfig.temperature; default 0.01, the paper's)."
        },
    )
    tacl_loss_weight: float | None = field(
        default=None,
        metadata={"help": "tacl: weight of the contrastive term in the loss (default 1, as in the paper)."},
    )
    mlm_loss_weight: float | None = field(
        default=None, metadata={"help": "tacl: weight of the masked-LM term in the loss (default 1)."}
    )
    nsp_loss_weight: float | None = field(
        default=None, metadata={"help": "tacl: weight of the next-sentence-prediction term in the loss (default 1)."}
    )
    use_nsp: bool | None = field(
        default=None,
        metadata={
            "help": "tacl: train next-sentence prediction too (needs a student with an NSP head). Default: on for "
            "BERT students, off for others."
        },
    )
    exclude_padding_from_contrast: bool | None = field(
        default=None,
        metadata={
            "help": "tacl: keep padding out of the contrastive loss's negatives (default true); false reproduces the "
            "reference code, which pads to 256 and counts the padding as negatives."
        },
    )
    validation_split_percentage: float | None = field(
        default=None,
        metadata={
            "help": "Hold out this share (0, 50] of the corpus's documents for validation, evaluated on "
            "--eval_strategy/--eval_steps with the same masks each time: eval_loss per objective and eval_perplexity."
        },
    )
    validation_file: str | None = field(
        default=None, metadata={"help": "A validation corpus (any --corpus format) instead of a held-out split."}
    )
    diagnostics_steps: int | None = field(
        default=None,
        metadata={
            "help": "Every N steps, self-similarity and effective rank (with and without [MASK]) of the encoder on "
            "held-out sentences of the validation set, logged per layer and drawn in diagnostics.png."
        },
    )
    diagnostics_sentences: int = field(
        default=128, metadata={"help": "How many validation sentences --diagnostics_steps probes."}
    )
    peak_tflops: float | None = field(
        default=None,
        metadata={
            "help": "The device's dense peak TFLOP/s in the training precision, for the `mfu` in the logs (known "
            "GPUs: H100, H200, A100 in bf16)."
        },
    )
    ema_decay: float | None = field(
        default=None,
        metadata={
            "help": "Keep an exponential moving average of the weights on the device, updated after every optimizer "
            "step with this decay (e.g. 0.999), saved in every checkpoint and, at the end, as its own model in "
            "OUTPUT_DIR/ema/."
        },
    )
    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Before training, remove what hf-encoders wrote into --output_dir (model, code, tokenizer, card, plots, "
            "checkpoints); other files stay."
        },
    )
    preprocessing_num_workers: int | None = field(
        default=None, metadata={"help": "Processes for tokenisation (datasets.map)."}
    )
    keep_optimizer_state: bool = field(
        default=False,
        metadata={
            "help": "Keep the optimizer state in the last checkpoint of a finished run, to train it on later with "
            "--resume_from_checkpoint and a larger --max_steps; by default it is dropped (it is twice the model's size "
            "in fp32), and the final model is what is kept."
        },
    )

    def __post_init__(self):
        if isinstance(self.corpus, list):  # --corpus given more than once
            self.corpus = ",".join(self.corpus)
        if self.block_size_schedule:  # every length-dependent part of the run (positions, validation) takes the longest
            from .schedules import longest_block  # here: --help imports no torch

            longest = longest_block(self.block_size_schedule)
            if self.block_size not in (None, longest):
                raise ValueError(
                    f"--block_size {self.block_size} is moot with --block_size_schedule, which sets the length of every "
                    "phase; drop --block_size."
                )
            self.block_size = longest
        if self.block_size is None:  # a cache's blocks have one size: the run takes it (and refuses another given)
            from_cache = self.tokenized_dir is not None and recorded_block_size(self.tokenized_dir)
            self.block_size = from_cache or DEFAULT_BLOCK_SIZE

    @property
    def starting_checkpoint(self) -> str | None:
        """Where training starts from, if not from scratch: a checkpoint to continue or a causal LM to convert."""
        return self.model_name_or_path or self.from_causal_lm
