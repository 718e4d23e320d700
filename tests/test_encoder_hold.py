"""`pretrain --method mae_lm --model_name_or_path ENCODER --hold_encoder_steps N`: the encoder, less the word embeddings
its LM head shares, stays exactly where it started for N steps, weight decay included, while the decoder, the head and
the embeddings train; then it trains too. `EncoderHoldCallback` in a plain Trainer leaves what the user froze frozen.
Settings that cannot hold parameters are refused."""

import logging
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file
from transformers import Trainer, TrainingArguments

from hf_encoders import EncoderHoldCallback, MaeLmForMaskedLM
from hf_encoders.methods.mae_lm.encoder_hold import check_parallelism, held_parameters
from hf_encoders_cli import main
from tests.tiny_models import counting_batch, save_tiny_bert, tiny_mae_lm_config

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_encoder_stays_where_it_started_until_the_hold_ends(tmp_path, caplog):
    source = save_tiny_bert(tmp_path / "bert")
    output = tmp_path / "held"
    argv = ["pretrain", "--method", "mae_lm", "--model_name_or_path", source, "--hold_encoder_steps", "2"]
    argv += ["--max_steps", "3", "--max_documents", "20", "--block_size", "32", "--per_device_train_batch_size", "2"]
    # A large rate and weight decay: anything AdamW touched would move.
    argv += ["--learning_rate", "1e-2", "--weight_decay", "0.1", "--save_strategy", "steps", "--save_steps", "1"]
    argv += ["--report_to", "none", "--use_cpu", "true", "--output_dir", str(output)]
    with caplog.at_level(logging.WARNING):
        assert main(argv) == 0
    start = MaeLmForMaskedLM.from_encoder(source).state_dict()
    saved = {step: load_file(output / f"checkpoint-{step}" / "model.safetensors") for step in (1, 2, 3)}
    held = [name for name in saved[1] if name.startswith("mae_lm.") and "word_embeddings" not in name]
    free = [name for name in saved[1] if name not in held]
    assert len(held) > 10 and any(name.startswith("decoder.") for name in free)
    for step in (1, 2):
        assert all(torch.equal(saved[step][name], start[name]) for name in held), f"the encoder moved by step {step}"
    assert all(not torch.equal(saved[2][name], saved[1][name]) for name in free)
    assert all(not torch.equal(saved[3][name], saved[2][name]) for name in held), "released at step 3"
    assert "- encoder held still for the first 2 steps" in (output / "README.md").read_text()
    assert "The encoder is held still until step 2" in caplog.text and "Step 2: the encoder is released" in caplog.text


def test_in_a_plain_trainer_a_run_shorter_than_the_hold_warns_and_leaves_the_user_frozen_layer_frozen(tmp_path, caplog):
    torch.manual_seed(0)
    model = MaeLmForMaskedLM(tiny_mae_lm_config())
    frozen = list(model.mae_lm.layers[0].parameters())
    for parameter in frozen:
        parameter.requires_grad_(False)  # the user's own choice: it must outlive the hold
    batch = counting_batch("mae_lm", torch.Generator().manual_seed(0))
    rows = [{key: value[index] for key, value in batch.items()} for index in range(len(batch["input_ids"]))]
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    arguments = TrainingArguments(
        output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=4, learning_rate=1e-2, weight_decay=0.1,
        report_to="none", use_cpu=True, save_strategy="no", disable_tqdm=True,
    )  # fmt: skip
    with caplog.at_level(logging.WARNING):
        Trainer(model=model, args=arguments, train_dataset=rows, callbacks=[EncoderHoldCallback(5)]).train()
    assert "held for 5 steps, the whole run (2 steps): only the decoder, the LM head and the word embeddings" in (
        caplog.text
    )
    after = model.state_dict()
    encoder = [name for name in after if name.startswith("mae_lm.") and "word_embeddings" not in name]
    assert all(torch.equal(after[name], before[name]) for name in encoder)
    decoder = [name for name in after if name.startswith("decoder.layers.")]
    assert all(not torch.equal(after[name], before[name]) for name in decoder)
    # Released at the end, as the model was given: trainable but for the layer the user froze.
    assert not any(parameter.requires_grad for parameter in frozen)
    assert sum(parameter.requires_grad for parameter in model.parameters()) == len(list(model.parameters())) - len(
        frozen
    )


def test_under_lora_only_the_encoders_adapters_are_held():
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(MaeLmForMaskedLM(tiny_mae_lm_config()), LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    adapters = {id(p): name for name, p in model.named_parameters() if p.requires_grad}
    held = {adapters[id(p)] for p in held_parameters(model)}
    # peft's own base_model is the whole network: the decoder's adapters must stay free.
    assert held == {name for name in adapters.values() if ".mae_lm.layers." in name}
    assert len(held) == 8 and len(adapters) == 12


@pytest.mark.parametrize("main_process", [True, False])
def test_a_loop_stopped_inside_the_hold_is_held_again_by_the_next_and_released_at_its_end(main_process, caplog):
    # auto_find_batch_size reruns the loop with the same model and callbacks after an out-of-memory error.
    model = MaeLmForMaskedLM(tiny_mae_lm_config())
    callback, args = EncoderHoldCallback(3), SimpleNamespace(**PARALLEL_DEFAULTS)
    state = SimpleNamespace(global_step=0, max_steps=10, is_world_process_zero=main_process)
    encoder = held_parameters(model)
    with caplog.at_level(logging.WARNING):
        for _loop in range(2):
            callback.on_train_begin(args, state, None, model=model)
            assert callback.held == encoder and not any(p.requires_grad for p in encoder)
        state.global_step = 3
        callback.on_step_begin(args, state, None)
    assert all(p.requires_grad for p in model.parameters())
    # Every DDP rank runs the callback; only the main process says so.
    assert (caplog.text.count("held still until step 3"), caplog.text.count("Step 3: the encoder is released")) == (
        (2, 1) if main_process else (0, 0)
    )


PARALLEL_DEFAULTS = dict(
    fsdp=[], deepspeed=None, world_size=1, ddp_find_unused_parameters=None, activation_checkpointing=False,
    ddp_static_graph=None,
)  # fmt: skip


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(fsdp=["full_shard"]), "untested with FSDP and DeepSpeed"),
        (dict(deepspeed="ds.json"), "untested with FSDP and DeepSpeed"),
        (dict(ACCELERATE_USE_FSDP="true"), "untested with FSDP and DeepSpeed"),  # `accelerate launch`'s config
        (dict(ACCELERATE_USE_DEEPSPEED="true"), "untested with FSDP and DeepSpeed"),
        (dict(world_size=2, ddp_find_unused_parameters=False), "pass --ddp_find_unused_parameters true"),
        (dict(world_size=2, activation_checkpointing=True), "pass --ddp_find_unused_parameters true"),
        (dict(world_size=2, model_checkpoints=True), "pass --ddp_find_unused_parameters true"),
        (dict(world_size=2, ddp_static_graph=True), "leave --ddp_static_graph unset"),
        (dict(world_size=2), None),  # Trainer's default: DDP looks for unused parameters
        (dict(world_size=2, activation_checkpointing=True, ddp_find_unused_parameters=True), None),
        (dict(ACCELERATE_USE_FSDP="false"), None),
    ],
)
def test_parallel_settings_that_cannot_hold_parameters_are_refused(settings, message, monkeypatch):
    for name in ("ACCELERATE_USE_FSDP", "ACCELERATE_USE_DEEPSPEED"):
        monkeypatch.delenv(name, raising=False)
        if name in settings:
            monkeypatch.setenv(name, settings.pop(name))
    # The model's own switch (`model.gradient_checkpointing_enable()`), which Trainer's rule reads as well.
    model = SimpleNamespace(is_activation_checkpointing=settings.pop("model_checkpoints", False))
    args = SimpleNamespace(**{**PARALLEL_DEFAULTS, **settings})
    if message is None:
        check_parallelism(args, model)
    else:
        with pytest.raises(ValueError, match=message):
            check_parallelism(args, model)
