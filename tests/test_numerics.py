"""Mixed-precision numerics of every pre-training method, and the callback that stops a run at a NaN/inf loss.

bf16 and fp16 run under `torch.autocast("cpu", ...)` in a plain loop. Trainer turns autocast on for
`TrainingArguments(bf16=True, use_cpu=True)` (tested below), but with `fp16=True, use_cpu=True` it trains in fp32
without a word (accelerate autocasts fp16 on accelerators only), so fp16 is only testable on CPU by hand.
The data is learnable (every row counts up by one), so the models become confident and the logits grow, which is
where low precision breaks; TaCL runs at the paper's temperature 0.01.
"""

import functools
import math
from types import SimpleNamespace

import pytest
import torch
from transformers import TrainerCallback, TrainingArguments

from hf_encoders import MaeLmForMaskedLM, NonFiniteLossCallback
from hf_encoders.models.tacl.modeling_tacl import token_contrastive_loss
from hf_encoders.training.callbacks import NonFiniteLossError
from hf_encoders.training.trainer import PretrainingTrainer
from tests.method_specs import PRETRAINING_METHODS, tiny_pretraining_model
from tests.tiny_models import CountingExamples, counting_batch, tiny_mae_lm_config

STEPS = 200
LEARNING_RATE = 1e-3
LOW_PRECISION = {"bf16": torch.bfloat16, "fp16": torch.float16}


pytestmark = pytest.mark.usefixtures("one_thread")


@functools.cache
def train(method: str, dtype: torch.dtype) -> SimpleNamespace:
    """STEPS AdamW steps at lr 1e-3 with gradient clipping at 1.0 (Trainer's default) under autocast (fp32: none).
    Returns the losses, the pre-clipping gradient norms and the dtypes the model's linear layers produced."""
    model = tiny_pretraining_model(method).train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LEARNING_RATE)
    linear_dtypes = set()
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.register_forward_hook(lambda module, inputs, output: linear_dtypes.add(output.dtype))
    generator = torch.Generator().manual_seed(1)
    losses, norms = [], []
    for _ in range(STEPS):
        batch = counting_batch(method, generator)
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            loss = model(**batch).loss
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0))
        losses.append(loss.detach())
        optimizer.step()
        optimizer.zero_grad()
    return SimpleNamespace(
        losses=torch.stack(losses),
        grad_norms=torch.stack(norms),
        linear_dtypes=linear_dtypes,
        loss_dtype=loss.dtype,
        weights_finite=all(torch.isfinite(p).all() for p in model.parameters()),
    )


@pytest.mark.parametrize("precision", sorted(LOW_PRECISION))
@pytest.mark.parametrize("method", PRETRAINING_METHODS)
def test_low_precision_training_stays_finite_and_tracks_fp32(method, precision):
    run = train(method, LOW_PRECISION[precision])
    assert run.linear_dtypes == {LOW_PRECISION[precision]}, (
        f"autocast did not reach the linear layers: {run.linear_dtypes}"
    )
    assert run.loss_dtype == torch.float32, "the loss must be reduced in fp32"
    bad_steps = (~torch.isfinite(run.losses) | ~torch.isfinite(run.grad_norms)).nonzero().flatten().tolist()
    assert not bad_steps, f"non-finite loss or gradient norm at steps {bad_steps[:10]}"
    assert run.weights_finite
    # It learns, and learns what fp32 learns: the mean loss over the last 20 steps agrees within 5%.
    first, last = run.losses[:20].mean().item(), run.losses[-20:].mean().item()
    assert last < 0.97 * first, f"{precision} {method} did not learn: loss {first:.3f} -> {last:.3f}"
    reference = train(method, torch.float32).losses[-20:].mean().item()
    assert abs(last - reference) <= 0.05 * reference, (
        f"{precision} {method}: final loss {last:.4f}, fp32 {reference:.4f}"
    )


@pytest.mark.parametrize("precision", sorted(LOW_PRECISION))
def test_tacl_contrast_is_fp32_under_autocast(precision):
    """With τ = 0.01 and nearly parallel states (the anisotropy TaCL exists to fix), a bf16 cosine is off by up to
    0.004, i.e. 0.4 in the logits: the contrast must leave autocast and score in fp32, exactly as without it."""
    generator = torch.Generator().manual_seed(0)
    common = torch.randn(4, 1, 64, generator=generator)
    student = common + 0.05 * torch.randn(4, 24, 64, generator=generator)
    teacher = student + 0.015 * torch.randn(4, 24, 64, generator=generator)
    anchors = torch.rand(4, 24, generator=generator) < 0.3
    reference = token_contrastive_loss(student, teacher, anchors, temperature=0.01)
    with torch.autocast("cpu", dtype=LOW_PRECISION[precision]):
        autocast = token_contrastive_loss(student, teacher, anchors, temperature=0.01)
    assert autocast.dtype == torch.float32
    torch.testing.assert_close(autocast, reference, rtol=1e-5, atol=1e-5)


# ---- NonFiniteLossCallback ----


class LinearDtypes(TrainerCallback):
    """Records the dtype the first linear layer produces during training."""

    def __init__(self):
        self.dtypes = set()

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        linear = next(m for m in model.modules() if isinstance(m, torch.nn.Linear))
        linear.register_forward_hook(
            lambda module, inputs, output: self.dtypes.add(output.dtype) if module.training else None
        )


class NanGradient(torch.autograd.Function):
    """Identity forward, NaN gradient: a step whose loss is finite but whose backward overflows."""

    @staticmethod
    def forward(ctx, value):
        return value.clone()

    @staticmethod
    def backward(ctx, gradient):
        return gradient * float("nan")


class PoisonedMaeLm(MaeLmForMaskedLM):
    """MAE-LM whose training forward number `poison_step` returns a NaN loss ("loss") or a finite loss with NaN
    gradients ("gradient"); with no gradient accumulation, forward k is optimizer step k."""

    _auto_class = None  # save like a plain MaeLmForMaskedLM, without copying this test file as remote code
    poison_step = 0
    poison = "loss"

    def forward(self, input_ids=None, attention_mask=None, labels=None, **kwargs):
        output = super().forward(input_ids=input_ids, attention_mask=attention_mask, labels=labels, **kwargs)
        if self.training:
            self.training_forwards = getattr(self, "training_forwards", 0) + 1
            if self.training_forwards == self.poison_step:
                output.loss = output.loss * float("nan") if self.poison == "loss" else NanGradient.apply(output.loss)
        return output


def trainer_for(model, output_dir, callbacks, **overrides):
    settings = dict(
        output_dir=str(output_dir),
        use_cpu=True,
        per_device_train_batch_size=4,
        max_steps=8,
        learning_rate=LEARNING_RATE,
        save_strategy="steps",
        save_steps=1,
        logging_steps=100,
        report_to=[],
        disable_tqdm=True,
        seed=0,
    )
    args = TrainingArguments(**{**settings, **overrides})
    # PretrainingTrainer hands the callback every training loss (a plain Trainer only its logs).
    return PretrainingTrainer(model=model, args=args, train_dataset=CountingExamples(), callbacks=callbacks)


def test_trainer_bf16_on_cpu_autocasts_and_stays_finite(tmp_path):
    dtypes = LinearDtypes()
    trainer = trainer_for(
        tiny_pretraining_model("mae_lm"),
        tmp_path,
        [dtypes, NonFiniteLossCallback()],
        bf16=True,
        max_steps=40,
        save_strategy="no",
        logging_steps=5,
    )
    trainer.train()
    assert dtypes.dtypes == {torch.bfloat16}
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(logs) == 8
    assert all(math.isfinite(entry["loss"]) and math.isfinite(entry["grad_norm"]) for entry in logs)


def poisoned_model(step: int, poison: str) -> PoisonedMaeLm:
    torch.manual_seed(0)
    model = PoisonedMaeLm(tiny_mae_lm_config())
    model.poison_step, model.poison = step, poison
    return model


def checkpoints(folder) -> list[int]:
    return sorted(int(path.name.split("-")[1]) for path in folder.glob("checkpoint-*"))


@pytest.mark.parametrize(
    "poison, save_steps, check_every, callback_first, stopped_at, saved",
    [
        ("loss", 1, None, False, 3, [1, 2]),  # NaN at step 3, a save due at every step: nothing from step 3 on
        ("loss", 1, None, True, 3, [1, 2]),  # the same with the callback before DefaultFlowCallback
        ("loss", 2, None, False, 4, [2]),  # NaN at step 3 seen before the next save (step 4), which is not written
        ("loss", 5, 1, False, 3, []),  # checked every step: stops at once, between saves
        ("gradient", 1, None, False, 3, [1, 2]),  # finite loss, NaN gradients: the NaN weights are never saved
    ],
)
def test_non_finite_loss_stops_training_and_keeps_the_last_good_checkpoint(
    tmp_path, poison, save_steps, check_every, callback_first, stopped_at, saved
):
    callback = NonFiniteLossCallback(check_every_n_steps=check_every)
    trainer = trainer_for(poisoned_model(3, poison), tmp_path, [callback], save_steps=save_steps)
    if callback_first:
        trainer.callback_handler.callbacks.remove(callback)
        trainer.callback_handler.callbacks.insert(0, callback)
    with pytest.raises(NonFiniteLossError) as raised:
        trainer.train()
    message = str(raised.value)
    if poison == "loss":
        assert "at step 3" in message and "nan" in message
    else:
        assert "weights became non-finite at or before step 3" in message
    for hint in ("learning rate", "bf16 instead of fp16", "check the data", "last good state"):
        assert hint in message
    assert trainer.state.global_step == stopped_at
    assert checkpoints(tmp_path) == saved
    if saved:
        last_good = MaeLmForMaskedLM.from_pretrained(tmp_path / f"checkpoint-{saved[-1]}")
        assert all(torch.isfinite(p).all() for p in last_good.parameters())


def test_without_the_callback_trainer_saves_the_poisoned_weights(tmp_path):
    """The control experiment: Trainer's default NaN filter hides the bad loss and checkpoints NaN weights."""
    trainer = trainer_for(poisoned_model(3, "loss"), tmp_path, [], max_steps=4, logging_steps=1)
    trainer.train()
    assert checkpoints(tmp_path) == [1, 2, 3, 4]
    assert all(math.isfinite(entry["loss"]) for entry in trainer.state.log_history if "loss" in entry)
    poisoned = MaeLmForMaskedLM.from_pretrained(tmp_path / "checkpoint-3")
    assert not all(torch.isfinite(p).all() for p in poisoned.parameters())


def test_logged_non_finite_values_stop_training():
    """A loss computed outside the model (custom compute_loss) reaches the callback only through the logs."""
    callback = NonFiniteLossCallback()
    state = SimpleNamespace(global_step=7)
    for logs, fp16, stops in (
        ({"loss": float("nan"), "grad_norm": 1.0}, False, True),
        ({"loss": float("inf")}, True, True),
        ({"loss": 2.0, "grad_norm": float("inf")}, False, True),
        ({"loss": 2.0, "grad_norm": float("inf")}, True, False),  # fp16's gradient scaler skips such steps
        ({"loss": 2.0, "grad_norm": 0.5}, False, False),
    ):
        control = SimpleNamespace(should_save=True, should_evaluate=False, should_training_stop=False)
        if stops:
            with pytest.raises(NonFiniteLossError, match="at step 7"):
                callback.on_log(SimpleNamespace(fp16=fp16), state, control, logs=logs)
            assert control.should_training_stop and not control.should_save
        else:
            callback.on_log(SimpleNamespace(fp16=fp16), state, control, logs=logs)
            assert not control.should_training_stop and control.should_save
