"""Step time of each method against its Transformers anchor, same shape and batch, timed side by side.

    python bench/run.py                      # CPU defaults: 6 layers x 512, batch 8 x 128
    python bench/run.py --layers 12 --hidden 768 --batch 32 --length 512 --device cuda --dtype bfloat16
    python bench/run.py ... --compile regional   # every model compiled block by block (compile_repeated_blocks)

One training step is forward + backward + AdamW step. Useful FLOPs are what the method needs (6·N·tokens for
trained weights, 2·N·tokens for the TaCL teacher, attention's QK^T/AV, the vocabulary projection only where
labels are), divided by the step time and by the machine's measured GEMM throughput in the same dtype: the useful
MFU. The models of a comparison are timed in alternation (interleaved repeats; the ratio is the median of each pair's
ratio), so a machine that slows down mid-run slows both. Ratios below 1 mean ours is faster.

Our models run as `hf-encoders pretrain` runs them on the device (`--attn_implementation auto`): MAE-LM on
flex_attention without attention dropout on CUDA, sdpa elsewhere; the anchors as transformers builds them (sdpa).
With `--compile` both are compiled, and the anchor is also timed eager, for the ratio against the eager anchor.

Targets: on CPU, the earlier issues' (TaCL <= 0.85, MAE-LM <= 1.0 at 15% and <= 0.85 at 40%, biphasic MLM <= 0.8,
biphasic CLM <= 1.0); on CUDA, issue 44's for the compiled step (MAE-LM <= 0.95 at 15% and <= 0.8 at 40%, TaCL <= 0.9,
biphasic MLM <= 0.9, biphasic CLM <= 1.0, MAE-LM fine-tuning <= 1.0; useful MFU of every pre-training step >= 0.40).
ModernBertForMaskedLM is a reference without a target.

Memory: "saved for backward" is what autograd holds after the forward (activations, each storage once, weights
excluded but their autocast copies counted), measured through saved-tensor hooks on any device; peak GiB is the
whole step's device peak (GPU only).

Loss memory (issue 13): the same step at hidden 256, where a 32k vocabulary's logits are most of what a step holds
for backward. Targets: at most 0.7x the anchor's memory for backward, with the time targets above.
"""

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from transformers import (
    BertConfig,
    BertForMaskedLM,
    BertForPreTraining,
    EuroBertConfig,
    EuroBertForMaskedLM,
    EuroBertForSequenceClassification,
    LlamaConfig,
    LlamaForCausalLM,
    ModernBertConfig,
    ModernBertForMaskedLM,
    RobertaConfig,
    RobertaForSequenceClassification,
)

from hf_encoders import (
    BiphasicConfig,
    BiphasicEncoderForPreTraining,
    BiphasicEncoderForSequenceClassification,
    MaeLmConfig,
    MaeLmForMaskedLM,
    MaeLmForSequenceClassification,
    TaclConfig,
    TaclForPreTraining,
)
from hf_encoders.data import index_tensors
from hf_encoders.data.masking_units import choose_exact
from hf_encoders.methods import METHODS, get_method
from hf_encoders.training.fast_path import FAST_ATTENTION
from hf_encoders.training.measures import known_peak_tflops

MASK_ID, PAD_ID, FIRST_REAL_ID = 4, 0, 5
LOSS_MEMORY_HIDDEN = 256
# Issue 44: the useful MFU of every pre-training method's compiled step on an H100 or H200.
GPU_MFU_TARGET = 0.40


@dataclass
class Comparison:
    method: str  # its name in hf_encoders.methods
    name: str
    target: float | None  # ours / anchor on CPU (None: a reference without one)
    ours: Callable[[], torch.nn.Module]
    anchor: Callable[[], torch.nn.Module]
    ours_batch: Callable[[], dict]
    anchor_batch: Callable[[], dict]
    useful_flops: Callable[[torch.nn.Module, dict], float]  # what the method needs per step, for our model
    gpu_target: float | None = None  # ours / anchor on CUDA, for the compiled step (issue 44)
    pretraining: bool = True  # a pre-training step, whose useful MFU has a target on CUDA
    anchor_is_ours: bool = False  # the anchor is our model on another batch: it runs on our attention too
    memory_target: float | None = None  # for saved-for-backward, ours / anchor (the loss-memory rows)
    vocabulary_loss: bool = True  # compared again in the loss-memory table (not the packing and fine-tuning rows)

    def target_on(self, device: str) -> float | None:
        return self.gpu_target if device == "cuda" else self.target


def linear_parameters(module: torch.nn.Module) -> int:
    return sum(m.weight.numel() for m in module.modules() if isinstance(m, torch.nn.Linear))


def stack_flops(module: torch.nn.Module, tokens: int, length: int, layers: int, hidden: int) -> float:
    """Forward FLOPs of a transformer stack: 2 per weight per token, plus QK^T and AV (4 * length * hidden per
    token and layer)."""
    return 2 * linear_parameters(module) * tokens + 4 * layers * tokens * length * hidden


def labelled(batch: dict) -> int:
    return int((batch["labels"] != -100).sum())


def tacl_flops(model, batch) -> float:
    # student forward + backward (3x), teacher forward only (1x), MLM head (dense + vocabulary) at the anchors.
    config = model.teacher.config
    tokens, length = batch["input_ids"].numel(), batch["input_ids"].shape[1]
    encoder = stack_flops(model.teacher, tokens, length, config.num_hidden_layers, config.hidden_size)
    head = 2 * (config.hidden_size**2 + config.hidden_size * config.vocab_size) * labelled(batch)
    return 3 * encoder + encoder + 3 * head


def mae_lm_flops(model, batch) -> float:
    # encoder on the kept tokens only, decoder on every position, head at the masked ones; all trained (3x).
    config = model.config
    masked, (rows, length) = labelled(batch), batch["input_ids"].shape
    kept_length = length - masked // rows
    encoder = stack_flops(model.mae_lm, rows * kept_length, kept_length, config.num_hidden_layers, config.hidden_size)
    decoder = stack_flops(
        model.decoder, rows * length, length, config.decoder_num_hidden_layers, config.decoder_hidden_size
    )
    head = 2 * (config.decoder_hidden_size * config.hidden_size + config.hidden_size * config.vocab_size) * masked
    return 3 * (encoder + decoder + head)


def biphasic_flops(model, batch) -> float:
    # the body on every token, the vocabulary projection at labelled positions; causal attention does half the work.
    config = model.config
    tokens, length = batch["input_ids"].numel(), batch["input_ids"].shape[1]
    causal = batch.get("objective") == "clm"
    body = stack_flops(model.model, tokens, length, config.num_hidden_layers, config.hidden_size)
    if causal:
        body -= 2 * config.num_hidden_layers * tokens * length * config.hidden_size
    return 3 * (body + 2 * config.hidden_size * config.vocab_size * labelled(batch))


def masked_batch(settings, vocab: int, probability: float) -> dict:
    """Every selected position becomes [MASK] with its label, an exact count per row as our collators select them;
    the same tensors feed both models (ours also get the collators' index tensors: `indexed`)."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(FIRST_REAL_ID, vocab, (settings.batch, settings.length), generator=generator)
    selected = choose_exact(torch.ones(ids.shape, dtype=torch.bool), probability, generator)
    return {"input_ids": ids.masked_fill(selected, MASK_ID), "labels": ids.masked_fill(~selected, -100)}


def indexed(batch: dict, probability: float | None, kept: bool = False) -> dict:
    """`batch` with the fixed-size index tensors our collators write (data/index_tensors.py): the labelled positions
    (every position with `probability` None: next-token labels), and MAE-LM's kept positions with `kept`."""
    labels, length = batch["labels"], batch["labels"].shape[1]
    slots = length if probability is None else index_tensors.labelled_slots(length, probability, exact=True)
    batch = {**batch, **index_tensors.labelled_index(labels, slots)}
    if kept:
        keep = batch["input_ids"] != MASK_ID
        batch.update(index_tensors.kept_index(keep, index_tensors.kept_slots(length, probability, 0.0)))
    return batch


def sentence_pair_batch(settings, vocab: int) -> dict:
    batch = masked_batch(settings, vocab, 0.15)
    half = settings.length // 2
    batch["token_type_ids"] = (torch.arange(settings.length) >= half).long().expand(settings.batch, -1)
    batch["next_sentence_label"] = torch.randint(0, 2, (settings.batch,), generator=torch.Generator().manual_seed(1))
    return batch


def padded_classification_batch(settings, vocab: int) -> dict:
    """A stock-script batch: lengths uniform in 16..length, right-padded to length, one label per row."""
    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(16, settings.length + 1, (settings.batch,), generator=generator)
    attention_mask = (torch.arange(settings.length) < lengths[:, None]).long()
    ids = torch.randint(FIRST_REAL_ID, vocab, (settings.batch, settings.length), generator=generator)
    labels = torch.randint(0, 2, (settings.batch,), generator=generator)
    return {"input_ids": ids * attention_mask, "attention_mask": attention_mask, "labels": labels}


def packed_documents_batch(settings, vocab: int) -> dict:
    """`masked_batch` with each row cut into documents of 16..length/2 tokens (positions restarting at 0), as
    `hf-encoders pretrain --pack_documents` writes blocks."""
    batch = masked_batch(settings, vocab, 0.15)
    generator = torch.Generator().manual_seed(2)
    rows = []
    for _ in range(settings.batch):
        positions = []
        while len(positions) < settings.length:
            positions += range(int(torch.randint(16, max(17, settings.length // 2 + 1), (1,), generator=generator)))
        rows.append(positions[: settings.length])
    return {**batch, "position_ids": torch.tensor(rows)}


def classification_flops(model, batch) -> float:
    """The stack on the real tokens only (what padding should cost), forward and backward."""
    config = model.config
    tokens, length = int(batch["attention_mask"].sum()), batch["input_ids"].shape[1]
    return 3 * stack_flops(model.base_model, tokens, length, config.num_hidden_layers, config.hidden_size)


def causal_batch(settings, vocab: int, shifted: bool) -> dict:
    """Llama shifts labels inside the model; the biphasic collator has already shifted them."""
    ids = torch.randint(
        FIRST_REAL_ID, vocab, (settings.batch, settings.length), generator=torch.Generator().manual_seed(0)
    )
    if not shifted:
        return {"input_ids": ids, "labels": ids.clone()}
    return {
        "input_ids": ids,
        "labels": torch.cat([ids[:, 1:], torch.full_like(ids[:, :1], -100)], dim=1),
        "objective": "clm",
    }


def ours_attention(settings, method: str, pretraining: bool = True) -> str:
    """Our model's attention implementation: `--attn_implementation`, or with `auto` what `hf-encoders pretrain`
    takes on the device (training/fast_path.py), and the model's default (sdpa) for fine-tuning."""
    implementation = getattr(settings, "attn_implementation", "auto")
    if implementation != "auto":
        return implementation
    return FAST_ATTENTION.get(method, "sdpa") if settings.device == "cuda" and pretraining else "sdpa"


def comparisons(settings) -> list[Comparison]:
    bert_vocab, llama_vocab = 30522, 32768
    encoder = dict(
        hidden_size=settings.hidden,
        num_hidden_layers=settings.layers,
        num_attention_heads=settings.hidden // 64,
        intermediate_size=4 * settings.hidden,
    )
    # FlexAttention has no attention dropout (BERT-style configs: 0.1): ours runs without it there, as pretrain does.
    flex = {"attention_probs_dropout_prob": 0.0}
    bert = BertConfig(
        vocab_size=bert_vocab, pad_token_id=PAD_ID, max_position_embeddings=max(512, settings.length), **encoder
    )
    student = BertConfig(**{**bert.to_dict(), **(flex if ours_attention(settings, "tacl") == "flex_attention" else {})})
    mae_lm = MaeLmConfig(
        vocab_size=bert_vocab,
        pad_token_id=PAD_ID,
        mask_token_id=MASK_ID,
        max_position_embeddings=max(512, settings.length),
        decoder_num_hidden_layers=max(1, settings.layers // 3),
        **encoder,
        **(flex if ours_attention(settings, "mae_lm") == "flex_attention" else {}),
    )
    modernbert = ModernBertConfig(
        vocab_size=bert_vocab,
        hidden_size=settings.hidden,
        num_hidden_layers=settings.layers,
        num_attention_heads=settings.hidden // 64,
        # GeGLU: 3 matrices of hidden x intermediate hold the 2 of hidden x 4 * hidden of the others.
        intermediate_size=8 * settings.hidden // 3,
        max_position_embeddings=max(512, settings.length),
        pad_token_id=PAD_ID,
        mask_token_id=MASK_ID,
        bos_token_id=1,
        cls_token_id=1,
        eos_token_id=2,
        sep_token_id=2,
    )
    llama = dict(
        vocab_size=llama_vocab,
        hidden_size=settings.hidden,
        num_hidden_layers=settings.layers,
        num_attention_heads=settings.hidden // 64,
        num_key_value_heads=settings.hidden // 64,
        intermediate_size=4 * settings.hidden,
        max_position_embeddings=max(2048, settings.length),
        pad_token_id=PAD_ID,
        bos_token_id=1,
        eos_token_id=2,
    )
    result = [
        Comparison(
            "tacl",
            "TaCL vs BertForPreTraining",
            0.85,
            lambda: TaclForPreTraining(TaclConfig(student_config=student.to_dict())),
            lambda: BertForPreTraining(bert),
            lambda: indexed(sentence_pair_batch(settings, bert_vocab), 0.15),
            lambda: sentence_pair_batch(settings, bert_vocab),
            tacl_flops,
            gpu_target=0.9,
        ),
    ]
    for probability, target, gpu_target in ((0.15, 1.0, 0.95), (0.40, 0.85, 0.8)):
        result.append(
            Comparison(
                "mae_lm",
                f"MAE-LM vs BertForMaskedLM, {probability:.0%} masked",
                target,
                lambda: MaeLmForMaskedLM(mae_lm),
                lambda: BertForMaskedLM(bert),
                lambda p=probability: indexed(masked_batch(settings, bert_vocab, p), p, kept=True),
                lambda p=probability: masked_batch(settings, bert_vocab, p),
                mae_lm_flops,
                gpu_target=gpu_target,
            )
        )
    result += [
        Comparison(
            "biphasic",
            "biphasic MLM vs EuroBertForMaskedLM, 40% masked",
            0.8,
            lambda: BiphasicEncoderForPreTraining(BiphasicConfig(mask_token_id=MASK_ID, **llama)),
            lambda: EuroBertForMaskedLM(EuroBertConfig(mask_token_id=MASK_ID, **llama)),
            lambda: indexed(masked_batch(settings, llama_vocab, 0.4), 0.4),
            lambda: masked_batch(settings, llama_vocab, 0.4),
            biphasic_flops,
            gpu_target=0.9,
        ),
        Comparison(
            "biphasic",
            "biphasic CLM vs LlamaForCausalLM",
            1.0,
            lambda: BiphasicEncoderForPreTraining(BiphasicConfig(mask_token_id=MASK_ID, **llama)),
            lambda: LlamaForCausalLM(LlamaConfig(**llama)),
            lambda: indexed(causal_batch(settings, llama_vocab, shifted=True), None),
            lambda: causal_batch(settings, llama_vocab, shifted=False),
            biphasic_flops,
            gpu_target=1.0,
        ),
        Comparison(
            "mae_lm",
            "MAE-LM vs ModernBertForMaskedLM, 15% masked",
            None,
            lambda: MaeLmForMaskedLM(mae_lm),
            lambda: ModernBertForMaskedLM(modernbert),
            lambda: indexed(masked_batch(settings, bert_vocab, 0.15), 0.15, kept=True),
            lambda: masked_batch(settings, bert_vocab, 0.15),
            mae_lm_flops,
            vocabulary_loss=False,
        ),
        Comparison(
            "mae_lm",
            "MAE-LM packed documents vs joined documents (same model), 15% masked",
            1.1,
            lambda: MaeLmForMaskedLM(mae_lm),
            lambda: MaeLmForMaskedLM(mae_lm),
            lambda: indexed(packed_documents_batch(settings, bert_vocab), 0.15, kept=True),
            lambda: indexed(masked_batch(settings, bert_vocab, 0.15), 0.15, kept=True),
            mae_lm_flops,
            anchor_is_ours=True,
            vocabulary_loss=False,
        ),
        Comparison(
            "mae_lm",
            "fine-tuning, padded: MaeLmForSequenceClassification vs RobertaForSequenceClassification",
            0.7,
            lambda: MaeLmForSequenceClassification(mae_lm),
            lambda: RobertaForSequenceClassification(
                RobertaConfig(
                    vocab_size=bert_vocab, pad_token_id=PAD_ID, max_position_embeddings=settings.length + 2, **encoder
                )
            ),
            lambda: padded_classification_batch(settings, bert_vocab),
            lambda: padded_classification_batch(settings, bert_vocab),
            classification_flops,
            gpu_target=1.0,
            pretraining=False,
            vocabulary_loss=False,
        ),
        Comparison(
            "biphasic",
            "fine-tuning, padded: BiphasicEncoderForSequenceClassification vs EuroBertForSequenceClassification",
            0.7,
            lambda: BiphasicEncoderForSequenceClassification(BiphasicConfig(mask_token_id=MASK_ID, **llama)),
            lambda: EuroBertForSequenceClassification(EuroBertConfig(mask_token_id=MASK_ID, **llama)),
            lambda: padded_classification_batch(settings, llama_vocab),
            lambda: padded_classification_batch(settings, llama_vocab),
            classification_flops,
            pretraining=False,
            vocabulary_loss=False,
        ),
    ]
    return result


def loss_memory_comparisons(settings) -> list[Comparison]:
    """Every comparison again at hidden 256, where the vocabulary head's logits are most of what a step holds."""
    narrow = argparse.Namespace(**{**vars(settings), "hidden": LOSS_MEMORY_HIDDEN})
    return [
        dataclasses.replace(comparison, name=f"loss memory: {comparison.name}", memory_target=0.7)
        for comparison in comparisons(narrow)
        if comparison.vocabulary_loss
    ]


def encoder(model: torch.nn.Module) -> torch.nn.Module:
    """The part of a model that runs before its vocabulary head and loss (MAE-LM: encoder, then decoder)."""
    if isinstance(model, TaclForPreTraining):
        return model.student.base_model
    if isinstance(model, MaeLmForMaskedLM):
        return model.decoder
    return model.base_model


def compile_repeated_blocks(model: torch.nn.Module) -> None:
    """Regional compilation (PyTorch's recipe; accelerate's `compile_regions` without the other modules): every block
    of a stack of blocks of one class compiled in place, so that the blocks after the first reuse its compiled code
    and a model compiles one layer's forward and backward instead of all of them; the rest runs eager."""
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) and all(type(b) is type(module[0]) for b in module):
            for block in module:
                block.compile()


class TimedStep:
    """One training step of `model` on `batch`: on our model's attention `implementation` (None: as built), compiled
    as `compile` says (None: eager; "whole": torch.compile(model), as Trainer's --torch_compile; "regional":
    `compile_repeated_blocks`)."""

    def __init__(self, model: torch.nn.Module, batch: dict, settings, implementation=None, compile=None):
        self.model = model.to(settings.device).train()
        if implementation is not None and implementation != self.model.config._attn_implementation:
            self.model.set_attn_implementation(implementation)
        if compile == "regional":
            compile_repeated_blocks(self.model)
        self.forward = torch.compile(self.model) if compile == "whole" else self.model
        self.batch = {k: v.to(settings.device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        # Fused, as Trainer's default optimizer (`adamw_torch_fused` from torch 2.8).
        self.optimizer = torch.optim.AdamW(trainable, lr=1e-5, fused=True)
        self.dtype = getattr(torch, settings.dtype)
        self.device = settings.device

    def __call__(self) -> float:
        synchronize(self.device)
        if self.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        self.loss().backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        synchronize(self.device)
        return time.perf_counter() - start

    def loss(self) -> torch.Tensor:
        with torch.autocast(self.device, dtype=self.dtype, enabled=self.dtype != torch.float32):
            return self.forward(**self.batch).loss

    def saved_for_backward_mib(self) -> tuple[float, float]:
        """Memory autograd holds for backward after one forward (activations, each storage counted once; the
        weights themselves excluded, their bf16/fp16 autocast copies included): the activation memory of a step,
        measured the same way on CPU and GPU. Returned in all, and the part saved once the encoder has run (the
        vocabulary head and the loss)."""
        weights = {p.untyped_storage().data_ptr() for p in self.model.parameters()}
        saved, after_encoder = {}, {}
        encoder_done = []
        hook = encoder(self.model).register_forward_hook(lambda *_: encoder_done.append(True))

        # The saved tensors are kept alive (so that no two share an address) until the forward is measured, in a list
        # emptied then, and never in the graph: the graph holds the pack hook, so a tensor that the hook returns, or
        # that its closure keeps, closes a reference cycle through autograd's C++ nodes that Python's garbage
        # collector cannot see, and every measured forward's activations stayed on the device to the end of the run
        # (GPU peak memory rose by ~15 GiB a comparison at base size).
        kept = []

        def pack(tensor: torch.Tensor) -> None:
            kept.append(tensor)
            storage = tensor.untyped_storage()
            if storage.data_ptr() not in weights:
                saved[storage.data_ptr()] = storage.nbytes()
                if encoder_done:
                    after_encoder[storage.data_ptr()] = storage.nbytes()

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda _: None):
            self.loss()  # never backpropagated
        kept.clear()
        hook.remove()
        return sum(saved.values()) / 2**20, sum(after_encoder.values()) / 2**20

    def peak_memory_gib(self) -> float | None:
        """Peak device memory of the last step (GPU only: CPU allocations are not tracked by torch)."""
        return torch.cuda.max_memory_allocated() / 2**30 if self.device == "cuda" else None


def gemm_peak_flops(settings, repeats: int = 5) -> float:
    """The machine's measured matmul throughput in the benchmark's dtype: the ceiling for useful FLOP/s. 8,192 wide on
    a GPU: 2,048 left an H200 at 288 of the 769 bf16 TFLOP/s an 8,192 product reached."""
    size = 8192 if settings.device == "cuda" else 2048
    dtype = getattr(torch, settings.dtype)
    a, b = (torch.randn(size, size, device=settings.device, dtype=dtype) for _ in range(2))
    a @ b  # warm-up
    times = []
    for _ in range(repeats):
        synchronize(settings.device)
        start = time.perf_counter()
        a @ b
        synchronize(settings.device)
        times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times)


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


@dataclass
class Result:
    ours_seconds: float  # medians
    anchor_seconds: float
    ratio: float  # median of ours / anchor over the interleaved pairs: robust to the machine's speed drifting
    useful_flops: float  # ours, per step
    ours_saved_mib: float | None  # held for backward after the forward (eager runs only)
    anchor_saved_mib: float | None
    ours_loss_saved_mib: float | None  # of which saved by the vocabulary head and the loss
    anchor_loss_saved_mib: float | None
    ours_peak_gib: float | None  # device memory of the whole step, GPU only
    anchor_peak_gib: float | None
    eager_anchor_seconds: float | None = None  # compiled runs: the anchor eager, and ours against it
    eager_anchor_ratio: float | None = None


def built_on(device: str, build: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    """A model built where it runs: initialising 110M parameters on the GPU takes a fraction of the CPU's time."""
    with torch.device(device):
        return build()


def run(comparison: Comparison, settings) -> Result:
    """Median step seconds of ours and of the anchor, timed alternately, and what each step holds in memory. Compiled
    (`--compile`), the anchor is timed eager too, in the same alternation."""
    torch.manual_seed(0)
    compile = getattr(settings, "compile", None)
    attention = ours_attention(settings, comparison.method, comparison.pretraining)
    anchor_attention = attention if comparison.anchor_is_ours else None
    ours = TimedStep(built_on(settings.device, comparison.ours), comparison.ours_batch(), settings, attention, compile)
    anchor = TimedStep(
        built_on(settings.device, comparison.anchor), comparison.anchor_batch(), settings, anchor_attention, compile
    )
    steps = [ours, anchor]
    if compile:
        steps.append(
            TimedStep(
                built_on(settings.device, comparison.anchor), comparison.anchor_batch(), settings, anchor_attention
            )
        )
    for step in steps + steps:  # warm-up: compilation, allocator, kernels, AdamW state (the first run's cost)
        step()
    times, peaks = [[] for _ in steps], [None for _ in steps]
    for _ in range(settings.repeats):
        for index, step in enumerate(steps):
            times[index].append(step())
            peaks[index] = step.peak_memory_gib()
    # Compiled, the saved-tensor hooks would compile every graph again: the eager table has the memory.
    unmeasured = (None, None)
    ours_saved, ours_loss_saved = unmeasured if compile else ours.saved_for_backward_mib()
    anchor_saved, anchor_loss_saved = unmeasured if compile else anchor.saved_for_backward_mib()

    def paired_ratio(theirs: list[float]) -> float:
        return statistics.median([mine / other for mine, other in zip(times[0], theirs)])

    return Result(
        statistics.median(times[0]),
        statistics.median(times[1]),
        paired_ratio(times[1]),
        comparison.useful_flops(ours.model, ours.batch),
        ours_saved,
        anchor_saved,
        ours_loss_saved,
        anchor_loss_saved,
        peaks[0],
        peaks[1],
        statistics.median(times[2]) if compile else None,
        paired_ratio(times[2]) if compile else None,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--only", help="run only comparisons whose name contains this text")
    parser.add_argument(
        "--attn_implementation",
        default="auto",
        help="for our models: auto (what hf-encoders pretrain takes on the device), sdpa, flex_attention, eager",
    )
    parser.add_argument(
        "--compile",
        nargs="?",
        const="whole",
        choices=["whole", "regional"],
        help="compile every model (the warm-up steps compile): whole (torch.compile, as Trainer's --torch_compile) "
        "or regional (each block of a stack compiled in place, the others reusing its code; the rest eager)",
    )
    parser.add_argument("--no_loss_memory", action="store_true", help="skip the loss-memory table (hidden 256)")
    parser.add_argument("--targets_only", action="store_true", help="only the comparisons with a target on the device")
    parser.add_argument("--list", action="store_true", help="print the rows this command would time, and stop")
    parser.add_argument(
        "--methods",
        default=",".join(name for name in METHODS if name != "mlm"),
        help=f"comma-separated methods to compare with their anchors ({', '.join(METHODS)}; mlm is the anchor itself)",
    )
    settings = parser.parse_args(argv)
    methods = {get_method(name.strip()).name for name in settings.methods.split(",")}
    for name in sorted(methods - {comparison.method for comparison in comparisons(settings)}):
        print(f"{name}: no comparison against a Transformers anchor yet (add one to comparisons() in bench/run.py)")

    def chosen(rows: list[Comparison]) -> list[Comparison]:
        return [
            row
            for row in rows
            if row.method in methods
            and (not settings.only or settings.only in row.name)
            and (not settings.targets_only or row.target_on(settings.device) is not None)
        ]

    speed_rows = chosen(comparisons(settings))
    loss_rows = [] if settings.no_loss_memory else chosen(loss_memory_comparisons(settings))
    if settings.list:
        for row in speed_rows + loss_rows:
            print(f"    {row.name} (ours on {ours_attention(settings, row.method, row.pretraining)})")
        return
    peak = gemm_peak_flops(settings)
    on_gpu = settings.device == "cuda"
    unit, scale = flop_unit(settings)
    datasheet = known_peak_tflops(torch.cuda.get_device_name()) if on_gpu else None
    print(
        f"{settings.layers} layers x {settings.hidden}, batch {settings.batch} x {settings.length}, {settings.device}"
        f"{f' ({torch.cuda.get_device_name()})' if on_gpu else ''}, {settings.dtype}, "
        f"{'compiled (' + settings.compile + ')' if settings.compile else 'eager'}, torch {torch.__version__}, "
        f"torch threads {torch.get_num_threads()}, median of {settings.repeats}; measured GEMM peak "
        f"{peak / scale:,.1f} {unit}{f' (datasheet {datasheet:,.0f} TFLOP/s)' if datasheet else ''}; targets: "
        f"{'issue 44, for the compiled step' if on_gpu else 'the CPU issues'}",
        flush=True,
    )
    if speed_rows:
        print_speed_table(speed_rows, settings, peak)
    if loss_rows:
        print_loss_memory_table(loss_rows, settings)


def flop_unit(settings) -> tuple[str, float]:
    return ("TFLOP/s", 1e12) if settings.device == "cuda" else ("GFLOP/s", 1e9)


def met(value: float, target: float | None, at_most: bool = True) -> tuple[str, str]:
    """(target, met) cells: "<= 0.9", "yes"; "-", "-" without a target."""
    if target is None:
        return "-", "-"
    ok = value <= target if at_most else value >= target
    return f"{'<=' if at_most else '>='} {target}", "yes" if ok else "NO"


def print_speed_table(rows: list[Comparison], settings, peak: float) -> None:
    tokens = settings.batch * settings.length
    compiled = bool(getattr(settings, "compile", None))
    eager_columns = " | anchor eager s/step | ratio to eager anchor" if compiled else ""
    unit, scale = flop_unit(settings)
    print(
        "| comparison | ours s/step | anchor s/step | ours tokens/s | ratio | target | met"
        f"{eager_columns} | useful {unit} | useful MFU | MFU target | MFU met "
        "| saved for backward MiB, ours / anchor | peak GiB, ours / anchor |"
    )
    print("|---" * (15 if compiled else 13) + "|")
    for comparison in rows:
        result = run(comparison, settings)
        useful = result.useful_flops / result.ours_seconds
        target, target_met = met(result.ratio, comparison.target_on(settings.device))
        mfu_target = GPU_MFU_TARGET if settings.device == "cuda" and comparison.pretraining else None
        mfu_cell, mfu_met = met(useful / peak, mfu_target, at_most=False)
        eager_cells = f" | {result.eager_anchor_seconds:.3f} | {result.eager_anchor_ratio:.2f}" if compiled else ""
        peak_memory = (
            "-" if result.ours_peak_gib is None else f"{result.ours_peak_gib:.2f} / {result.anchor_peak_gib:.2f}"
        )
        saved = (
            "-" if result.ours_saved_mib is None else f"{result.ours_saved_mib:,.0f} / {result.anchor_saved_mib:,.0f}"
        )
        print(
            f"| {comparison.name} | {result.ours_seconds:.3f} | {result.anchor_seconds:.3f} | "
            f"{tokens / result.ours_seconds:,.0f} | {result.ratio:.2f} | {target} | {target_met}{eager_cells} | "
            f"{useful / scale:,.1f} | {useful / peak:.2f} | {mfu_cell} | {mfu_met} | {saved} | {peak_memory} |",
            flush=True,
        )


def print_loss_memory_table(rows: list[Comparison], settings) -> None:
    print(
        f"\nLoss memory, hidden {LOSS_MEMORY_HIDDEN}:\n"
        "| comparison | ours s/step | anchor s/step | time ratio | time target | saved for backward MiB, ours / anchor "
        "| memory ratio | memory target | of which after the encoder MiB, ours / anchor | met |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for comparison in rows:
        result = run(comparison, settings)
        memory_ratio = result.ours_saved_mib / result.anchor_saved_mib
        time_target, time_met = met(result.ratio, comparison.target_on(settings.device))
        all_met = time_met != "NO" and memory_ratio <= comparison.memory_target
        print(
            f"| {comparison.name} | {result.ours_seconds:.3f} | {result.anchor_seconds:.3f} | {result.ratio:.2f} | "
            f"{time_target} | {result.ours_saved_mib:,.0f} / {result.anchor_saved_mib:,.0f} | "
            f"{memory_ratio:.2f} | <= {comparison.memory_target} | "
            f"{result.ours_loss_saved_mib:,.0f} / {result.anchor_loss_saved_mib:,.0f} | {'yes' if all_met else 'NO'} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
