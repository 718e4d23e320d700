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
from hf_encoders.cli import main
from hf_encoders.training.encoder_hold import check_parallelism
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


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(fsdp=["full_shard"]), "FSDP's and DeepSpeed's flattened parameters do not allow"),
        (dict(deepspeed="ds.json"), "FSDP's and DeepSpeed's flattened parameters do not allow"),
        (dict(world_size=2, ddp_find_unused_parameters=False), "pass --ddp_find_unused_parameters true"),
        (dict(world_size=2, gradient_checkpointing=True), "pass --ddp_find_unused_parameters true"),
        (dict(world_size=2), None),  # Trainer's default: DDP looks for unused parameters
        (dict(world_size=2, gradient_checkpointing=True, ddp_find_unused_parameters=True), None),
    ],
)
def test_parallel_settings_that_cannot_hold_parameters_are_refused(settings, message):
    defaults = dict(
        fsdp=[], deepspeed=None, world_size=1, ddp_find_unused_parameters=None, gradient_checkpointing=False
    )
    args = SimpleNamespace(**{**defaults, **settings})
    if message is None:
        check_parallelism(args)
    else:
        with pytest.raises(ValueError, match=message):
            check_parallelism(args)
