"""What `torchrun` runs for tests/test_distributed.py: each method's real `build_trainer` Trainer, trained under DDP.

    python -m torch.distributed.run --standalone --nproc_per_node 2 --module tests.distributed_worker \
        --model_name_or_path BERT_FOLDER --output_dir DIR --methods mlm,mae_lm,tacl,biphasic

All methods run one after another in the same processes, so the interpreter and process-group start-up is paid
once. For each method every rank writes `DIR/<method>/rank<R>.pt` (its final state_dict) and `rank<R>.json`
(every forward's step, objective and input digest, the logged losses, and what DDP registered for gradients).
Before training, every rank also builds an `mlm` Trainer with a tokenizer trained on the spot and writes that
tokenizer's vocabulary digest to `DIR/tokenizer/rank<R>.json`; builds an `mae_lm` Trainer from a token cache that
does not exist yet (`--tokenized_dir`), writing whether it built the cache and a digest of the blocks it read to
`DIR/token_cache/rank<R>.json`; and trains `mlm` on a streamed corpus (`--streaming`), writing the documents of its
part of the stream, the blocks it trained on and those it trained on again after resuming from a checkpoint to
`DIR/streamed/rank<R>.json`. After the methods, MAE-LM continues the BERT with its encoder held for half the steps and
writes the weights when the hold ends and at the end to `DIR/held/rank<R>.pt`. At the end every rank runs the CLI entry point
`hf-encoders pretrain --method tacl` and writes which post-training writers it called to `DIR/cli/rank<R>.json`.

Then, for FSDP2, every rank shards a tiny model of each method as accelerate does with its `examples/fsdp*.json`
(`shard_as_accelerate_does`, the layer classes from accelerate's own wrap policy), trains it on its half of a fixed
batch, and writes the gathered weights to `DIR/fsdp-<method>/rank<R>.pt`; rank 0 also saves the sharded model the
way Trainer's `save_model` does (`save_pretrained` with the gathered state dict) to `DIR/fsdp-<method>/checkpoint`. Trainer itself cannot be used for this on CPU: accelerate 1.15 enables FSDP only
on accelerators and turns `--fsdp` into DDP elsewhere (accelerate/state.py).

The helpers are imported by the test too, so the single-process reference runs are set up identically.
"""

import argparse
import hashlib
import json
import os
import traceback
from pathlib import Path

import torch
from accelerate.utils.fsdp_utils import _find_final_norm
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from transformers import TrainerCallback, TrainingArguments

from hf_encoders import METHODS
from hf_encoders.data.corpus import load_documents
from hf_encoders.methods.tacl.recipe import TaclRecipe
from hf_encoders.training import pretrain as pretrain_module
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.pretrain import build_trainer
from hf_encoders.training.streaming import stream_for_this_rank
from tests.method_specs import accelerate_wrap_classes, fsdp_variants, tiny_run_options
from tests.tiny_models import MASK_TOKEN_ID, VOCAB_SIZE

METHODS = tuple(METHODS)
MAX_STEPS = 4
STREAMED_DOCUMENTS = 9  # split over 2 ranks: 5 and 4


# mae_lm's DDP run (and the one process it is compared with) switches its masking rate and block length halfway
# (training/schedules.py): the ranks must agree on the step's schedules to match one process.
SCHEDULES = {"mae_lm": dict(mlm_probability_schedule="0.5:0.5,0.15:0.5", block_size_schedule="16:0.5,32:0.5")}


def method_arguments(method: str, init: str, **overrides) -> PretrainArguments:
    """A tiny run of `method` (tests/method_specs.py's `tiny_run_options`), without dropout: the single-process
    reference draws its dropout masks in a different order than two ranks started from one seed, so with dropout
    the runs could only agree statistically."""
    settings = dict(max_documents=40, block_size=32, **tiny_run_options(method, init, dropout=False))
    return PretrainArguments(method=method, **{**settings, **overrides})


def training_arguments(output_dir, per_device: int = 2, accumulation: int = 1, **overrides) -> TrainingArguments:
    """Under torchrun add ddp_backend="gloo" (accelerate would take MPI on a torch built with it); in a single
    process leave it out: there a backend makes accelerate look for a process group that does not exist."""
    settings = dict(
        output_dir=str(output_dir),
        max_steps=MAX_STEPS,
        logging_steps=1,
        save_strategy="no",
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=accumulation,
        learning_rate=1e-3,
        report_to="none",
        use_cpu=True,
        seed=0,
        dataloader_pin_memory=False,
        disable_tqdm=True,
    )
    return TrainingArguments(**{**settings, **overrides})


def digest(tensors: dict) -> str:
    """sha256 over (name, dtype, shape, bytes) of every tensor, in name order."""
    sha = hashlib.sha256()
    for name in sorted(tensors):
        value = tensors[name]
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().contiguous().reshape(-1)
            sha.update(f"{name}:{value.dtype}:{tuple(value.shape)}".encode())
            sha.update(value.view(torch.uint8).numpy().tobytes() if value.numel() else b"")
    return sha.hexdigest()


class ForwardRecorder(TrainerCallback):
    """Records every training forward of the (unwrapped) model: the optimizer step it belongs to, the objective
    a biphasic model ran with and a digest of everything fed to it (the data and the masks the collator drew)."""

    def __init__(self, trainer):
        self.step, self.forwards = 0, []
        trainer.model.register_forward_pre_hook(self.before_forward, with_kwargs=True)
        trainer.add_callback(self)

    def on_step_begin(self, args, state, control, **kwargs):
        self.step = state.global_step + 1

    def before_forward(self, model, positional, inputs):
        if model.training:
            objective = getattr(model, "objective", None)
            self.forwards.append({"step": self.step, "objective": objective, "inputs": digest(inputs)})


def logged_losses(trainer) -> dict[int, float]:
    return {entry["step"]: entry["loss"] for entry in trainer.state.log_history if "loss" in entry}


def final_state(model) -> dict[str, torch.Tensor]:
    # Cloned: tied weights share storage, and the files must stand alone.
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def ddp_registration(trainer) -> dict:
    """What DistributedDataParallel put in its gradient reducer, against the model's own parameters."""
    wrapped = trainer.model_wrapped
    model = trainer.model
    trainable = [p for p in model.parameters() if p.requires_grad]  # parameters() already de-duplicates tied weights
    frozen = [p for p in model.parameters() if not p.requires_grad]
    info = {
        "wrapper": type(wrapped).__name__,
        "trainable_tensors": len(trainable),
        "trainable_bytes": sum(p.numel() * p.element_size() for p in trainable),
        "frozen_tensors": len(frozen),
        "frozen_bytes": sum(p.numel() * p.element_size() for p in frozen),
    }
    if isinstance(wrapped, torch.nn.parallel.DistributedDataParallel):
        logging_data = wrapped._get_ddp_logging_data()
        info["reducer_tensors"] = logging_data["num_parameter_tensors"]
        info["reducer_bytes"] = logging_data["total_parameter_size_bytes"]
        info["find_unused_parameters"] = bool(logging_data.get("find_unused_parameters"))
    if hasattr(model, "teacher"):
        teacher = list(model.teacher.parameters())
        info["teacher_requires_grad"] = any(p.requires_grad for p in teacher)
        info["teacher_has_grad"] = any(p.grad is not None for p in teacher)
        info["teacher_in_optimizer"] = any(
            id(p) in {id(q) for group in trainer.optimizer.param_groups for q in group["params"]} for p in teacher
        )
    return info


def train_one(method: str, init: str, output_dir: Path, rank: int) -> None:
    folder = output_dir / method
    arguments = method_arguments(method, init, **SCHEDULES.get(method, {}))
    trainer = build_trainer(arguments, training_arguments(folder, ddp_backend="gloo"))
    recorder = ForwardRecorder(trainer)
    trainer.train()
    torch.save(final_state(trainer.model), folder / f"rank{rank}.pt")
    record = {
        "world_size": trainer.args.world_size,
        "process_index": trainer.args.process_index,
        "backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else None,
        "forwards": recorder.forwards,
        "losses": logged_losses(trainer),
        "log_history": [entry for entry in trainer.state.log_history if "loss" in entry],
        "ddp": ddp_registration(trainer),
    }
    (folder / f"rank{rank}.json").write_text(json.dumps(record, indent=1))


class WeightsAfter(TrainerCallback):
    """Keeps the model's weights as they are after optimizer step `step`."""

    def __init__(self, step: int):
        self.step, self.weights = step, None

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step == self.step:
            self.weights = final_state(model)


def held_encoder(init: str, output_dir: Path, rank: int) -> None:
    """MAE-LM continuing the tiny BERT with its encoder held for half the steps (`--hold_encoder_steps`), weight decay
    on: the weights when the hold ends and at the end."""
    arguments = PretrainArguments(
        method="mae_lm", model_name_or_path=init, hold_encoder_steps=MAX_STEPS // 2, max_documents=40, block_size=32
    )
    trainer = build_trainer(arguments, training_arguments(output_dir / "held", ddp_backend="gloo", weight_decay=0.1))
    after_hold = WeightsAfter(MAX_STEPS // 2)
    trainer.add_callback(after_hold)
    trainer.train()
    weights = {"after_hold": after_hold.weights, "final": final_state(trainer.model)}
    torch.save(weights, output_dir / "held" / f"rank{rank}.pt")


def tokenizer_on_the_spot(init: str, output_dir: Path, rank: int) -> None:
    """`hf-encoders pretrain` without --tokenizer_name: every rank builds the Trainer, tokenizer included."""
    trainer = build_trainer(
        method_arguments("mlm", init, tokenizer_name=None, vocab_size=300),
        training_arguments(output_dir / "tokenizer", ddp_backend="gloo"),
    )
    vocab = sorted(trainer.processing_class.get_vocab().items())
    record = {"size": len(vocab), "vocab": hashlib.sha256(json.dumps(vocab).encode()).hexdigest()}
    (output_dir / "tokenizer" / f"rank{rank}.json").write_text(json.dumps(record))


def token_cache_once(init: str, output_dir: Path, rank: int) -> None:
    """`--tokenized_dir` naming a folder with no cache yet, on every rank: records whether this rank built the cache
    and the blocks it trains on."""
    from hf_encoders.data import token_cache

    built = []
    build_cache = token_cache.build_cache
    token_cache.build_cache = lambda *args, **kwargs: built.append(build_cache(*args, **kwargs))
    try:
        trainer = build_trainer(
            method_arguments("mae_lm", init, tokenized_dir=str(output_dir / "token_cache" / "cache")),
            training_arguments(output_dir / "token_cache", ddp_backend="gloo"),
        )
    finally:
        token_cache.build_cache = build_cache
    blocks = trainer.train_dataset.to_dict()["input_ids"]
    record = {
        "built": len(built),
        "blocks": len(blocks),
        "digest": hashlib.sha256(json.dumps(blocks).encode()).hexdigest(),
    }
    (output_dir / "token_cache" / f"rank{rank}.json").write_text(json.dumps(record))


def unmasked_blocks_trained(trainer) -> list[list[int]]:
    """Fills, as `trainer` trains, with the rows it trains on, unmasked: labels where masked, the input elsewhere
    (mlm keeps every other token)."""
    trained = []
    compute_loss = trainer.compute_loss

    def recording_compute_loss(model, inputs, *args, **kwargs):
        trained.extend(torch.where(inputs["labels"] != -100, inputs["labels"], inputs["input_ids"]).tolist())
        return compute_loss(model, inputs, *args, **kwargs)

    trainer.compute_loss = recording_compute_loss
    return trained


def streamed(init: str, output_dir: Path, rank: int) -> None:
    """`hf-encoders pretrain --streaming` (mlm): the documents of this rank's part of the stream, the blocks it trained
    on beside the first blocks of its own packed stream, and those trained again by a run resumed from step 2 (from
    this rank's saved stream position)."""
    folder = output_dir / "streamed"
    args = method_arguments("mlm", init, streaming=True, max_documents=STREAMED_DOCUMENTS)
    saving = dict(save_strategy="steps", save_steps=2)
    training_args = training_arguments(folder, ddp_backend="gloo", **saving)
    trainer = build_trainer(args, training_args)
    trained = unmasked_blocks_trained(trainer)
    trainer.train()
    checkpoint = str(folder / "checkpoint-2")
    resumed = build_trainer(args, training_arguments(folder, ddp_backend="gloo", **saving), checkpoint)
    trained_after_resuming = unmasked_blocks_trained(resumed)
    resumed.train(resume_from_checkpoint=checkpoint)
    own_documents = stream_for_this_rank(load_documents(streaming=True).take(STREAMED_DOCUMENTS), training_args)
    record = {
        "documents": [row["text"] for row in own_documents],
        "trained": trained,
        "own_blocks": [block["input_ids"] for block, _ in zip(trainer.train_dataset, trained)],
        "trained_after_resuming": trained_after_resuming,
    }
    (folder / f"rank{rank}.json").write_text(json.dumps(record))


def cli_pretrain(init: str, output_dir: Path, rank: int) -> None:
    """`hf-encoders pretrain --method tacl` (the CLI entry point, whole) on every rank, recording which ranks write
    the files `pretrain()` adds after `trainer.save_model()`: the loss curve, the model card, the exported student.
    Runs last: its writes follow every collective, so a rank failing there cannot leave the other one waiting."""
    calls = []

    def recorded(name, function):
        def wrapper(*args, **kwargs):
            calls.append(name)
            return function(*args, **kwargs)

        return wrapper

    pretrain_module.plot_loss_curves = recorded("loss_curve", pretrain_module.plot_loss_curves)
    pretrain_module.write_model_card = recorded("model_card", pretrain_module.write_model_card)
    TaclRecipe.export_encoder = recorded("export_student", TaclRecipe.export_encoder)
    argv = [
        "--method",
        "tacl",
        "--model_name_or_path",
        init,
        "--max_documents",
        "40",
        "--block_size",
        "32",
        "--output_dir",
        str(output_dir / "cli" / "run"),
        "--max_steps",
        "2",
        "--per_device_train_batch_size",
        "2",
        "--save_strategy",
        "no",
        "--report_to",
        "none",
        "--use_cpu",
        "--ddp_backend",
        "gloo",
        "--disable_tqdm",
        "true",
    ]
    try:
        pretrain_module.main(argv)
        error = None
    except Exception:
        error = traceback.format_exc()
    record = {"calls": calls, "error": error, "process_group_left": torch.distributed.is_initialized()}
    (output_dir / "cli" / f"rank{rank}.json").write_text(json.dumps(record))


# ---- FSDP2 ----

# method -> the example FSDP file it trains with and its tiny model (tests/method_specs.py). TaCL around BERT is
# known to fail (see FSDP_KNOWN_FAILURES).
FSDP_VARIANTS = fsdp_variants()
FSDP_CONFIGS = {method: variant.config_file for method, variant in FSDP_VARIANTS.items()}
FSDP_KNOWN_FAILURES = ("tacl-bert",)
FSDP_STEPS = 3


def fsdp_model(method: str) -> torch.nn.Module:
    """A tiny dropout-free model of the method, the same on every rank."""
    torch.manual_seed(0)
    return FSDP_VARIANTS[method].model()


def fsdp_batch(method: str, step: int) -> dict:
    """The global batch of one step: 4 rows, rows 1 and 3 padded, the same number of targets in every row, so the
    mean of two 2-row halves' losses is the 4-row loss and 2 ranks must match 1 process on all 4 rows."""
    generator = torch.Generator().manual_seed(100 + step)
    rows, length = 4, 12
    input_ids = torch.randint(5, VOCAB_SIZE, (rows, length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1::2, length - 3 :] = 0
    input_ids[1::2, length - 3 :] = 0
    labels = torch.full_like(input_ids, -100)
    if method == "biphasic":  # next-token labels wherever the next token is real in every row
        labels[:, : length - 4] = input_ids[:, 1 : length - 3]
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
    labels[:, [3, 7]] = input_ids[:, [3, 7]]
    input_ids[:, [3, 7]] = MASK_TOKEN_ID
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
    if method == "tacl-bert":  # NSP is on for BERT students only
        batch["next_sentence_label"] = torch.tensor([0, 1, 1, 0])
    return batch


def train_fsdp_steps(model: torch.nn.Module, method: str, rows: slice) -> None:
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    for step in range(FSDP_STEPS):
        batch = {name: value[rows] for name, value in fsdp_batch(method, step).items()}
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def shard_as_accelerate_does(model: torch.nn.Module, layer_classes: list[str]) -> list[str]:
    """The sharding of accelerate 1.15's `fsdp2_prepare_model` (accelerate/utils/fsdp_utils.py) where its wrap policy
    picks `layer_classes`: each such layer, then the input embeddings alone when untied, then one group of final
    norm, input and output embeddings (tied) or final norm and output embeddings (untied), then the root.
    Returns the names of the layer classes found."""
    units = [module for module in model.modules() if type(module).__name__ in layer_classes]
    found = sorted({type(module).__name__ for module in units})  # before fully_shard renames them FSDP<Name>
    for module in units:
        fully_shard(module)
    input_embeddings, output_embeddings = model.get_input_embeddings(), model.get_output_embeddings()
    tied = output_embeddings is not None and input_embeddings.weight is output_embeddings.weight
    if not tied:
        fully_shard(input_embeddings)
    tail = [_find_final_norm(model), *([input_embeddings] if tied else []), output_embeddings]
    fully_shard([module for module in tail if module is not None], reshard_after_forward=False)
    fully_shard(model)
    return found


def fsdp_one(method: str, output_dir: Path, rank: int) -> None:
    folder = output_dir / f"fsdp-{method}"
    model = fsdp_model(method)
    record = {}
    try:
        record["wrapped"] = shard_as_accelerate_does(model, accelerate_wrap_classes(FSDP_CONFIGS[method], model))
        train_fsdp_steps(model, method, slice(2 * rank, 2 * rank + 2))
    except ValueError as error:  # a known failure is deterministic: every rank raises before any collective
        if method not in FSDP_KNOWN_FAILURES:
            raise
        (folder / f"rank{rank}.json").write_text(json.dumps({"error": str(error)}))
        return
    # Gathering is a collective: every rank takes part, as in Trainer's FULL_STATE_DICT save.
    state = {
        name: (value.full_tensor() if isinstance(value, DTensor) else value).detach().clone()
        for name, value in model.state_dict().items()
    }
    torch.save(state, folder / f"rank{rank}.pt")
    if rank == 0:
        model.save_pretrained(folder / "checkpoint", state_dict=state)
    record.update(
        model_class=type(model).__name__,
        sharded_parameters=sum(isinstance(p, DTensor) for p in model.parameters()),
        parameters=len(list(model.parameters())),
    )
    (folder / f"rank{rank}.json").write_text(json.dumps(record))
    torch.distributed.barrier()  # rank 0's checkpoint is complete before the launch can end


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_name_or_path", required=True, help="folder with the tiny BERT (and its tokenizer)")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--methods", default=",".join(METHODS))
    options = parser.parse_args()
    rank = int(os.environ.get("RANK", 0))
    output_dir = Path(options.output_dir)
    for method in [
        "tokenizer",
        "token_cache",
        "streamed",
        "cli",
        "held",
        *options.methods.split(","),
        *(f"fsdp-{name}" for name in FSDP_CONFIGS),
    ]:
        (output_dir / method).mkdir(parents=True, exist_ok=True)
    tokenizer_on_the_spot(options.model_name_or_path, output_dir, rank)
    token_cache_once(options.model_name_or_path, output_dir, rank)
    streamed(options.model_name_or_path, output_dir, rank)
    for method in options.methods.split(","):
        train_one(method, options.model_name_or_path, output_dir, rank)
        print(f"rank {rank}: {method} done", flush=True)
    held_encoder(options.model_name_or_path, output_dir, rank)
    for method in FSDP_CONFIGS:
        fsdp_one(method, output_dir, rank)
    cli_pretrain(options.model_name_or_path, output_dir, rank)


if __name__ == "__main__":
    main()
