"""Biphasic training: the collator's two views, the phase schedule on a real Trainer (resume, data-loader workers,
per-objective logs) and the `hf-encoders pretrain` recipe."""

import pytest
import torch
from datasets import Dataset
from transformers import Trainer, TrainerState, TrainingArguments

from hf_encoders import BiphasicEncoderForPreTraining, DataCollatorForBiphasic, PhaseScheduleCallback
from hf_encoders.data.index_tensors import LABELLED
from hf_encoders.methods.biphasic.collator import next_token_labels
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.recipe import get_recipe
from hf_encoders.training.trainer import PretrainingTrainer
from tests.tiny_models import MASK_TOKEN_ID, VOCAB_SIZE, tiny_biphasic_config, tiny_tokenizer

BOS, EOS = 1, 2  # tiny_tokenizer("llama")'s and tiny_biphasic_config's ids


def test_next_token_labels_shift_once_and_keep_eos_when_pad_is_eos():
    ids = torch.tensor([[5, 6, EOS, 7, EOS, EOS], [EOS, EOS, 8, 9, 10, EOS]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0], [0, 0, 1, 1, 1, 1]])  # right padding, then left padding, pad = EOS
    expected = torch.tensor([[6, EOS, 7, EOS, -100, -100], [-100, -100, 9, 10, EOS, -100]])
    assert torch.equal(next_token_labels(ids, mask), expected)


def test_collator_builds_both_views_from_one_padded_batch():
    tokenizer = tiny_tokenizer("llama")
    collator = DataCollatorForBiphasic(tokenizer, seed=0)
    examples = [{"input_ids": [BOS, *range(5, 45), EOS]}, {"input_ids": [BOS, 7, 8, 9, EOS]}]
    batch = collator(examples)
    views = {"input_ids", "attention_mask", "labels", "mlm_input_ids", "mlm_labels"}
    assert set(batch) == views | {*LABELLED, *(f"mlm_{name}" for name in LABELLED)}
    ids, mask = batch["input_ids"], batch["attention_mask"]
    assert torch.equal(batch["labels"], next_token_labels(ids, mask))
    selected = batch["mlm_labels"] != -100
    # Every selected token becomes [MASK] (the paper's 100% split) and its label is the clean token.
    assert torch.equal(batch["mlm_input_ids"][selected], torch.full((int(selected.sum()),), MASK_TOKEN_ID))
    assert torch.equal(batch["mlm_labels"][selected], ids[selected])
    assert torch.equal(batch["mlm_input_ids"][~selected], ids[~selected])
    # Never a special token or padding.
    assert not selected[(ids == BOS) | (ids == EOS) | (mask == 0)].any()


def test_collator_masks_forty_percent_of_real_tokens_with_a_configurable_split():
    tokenizer = tiny_tokenizer("llama", pad_token="</s>")
    examples = [list(range(5, VOCAB_SIZE)) * 4 for _ in range(64)]
    batch = DataCollatorForBiphasic(tokenizer, objective="mlm", seed=0)(examples)
    assert set(batch) == {"input_ids", "attention_mask", "labels", *LABELLED}
    assert abs((batch["labels"] != -100).float().mean().item() - 0.40) < 0.01

    split = DataCollatorForBiphasic(tokenizer, objective="mlm", mask_replace_prob=0.8, random_replace_prob=0.1, seed=0)(
        examples
    )
    selected = split["labels"] != -100
    replaced_by_mask = (split["input_ids"][selected] == MASK_TOKEN_ID).float().mean().item()
    unchanged = (split["input_ids"][selected] == split["labels"][selected]).float().mean().item()
    assert abs(replaced_by_mask - 0.8) < 0.02 and 0.08 < unchanged < 0.13  # 10% kept, plus random hits on itself


def test_clm_collator_and_its_errors():
    batch = DataCollatorForBiphasic(tiny_tokenizer("llama"), objective="clm")([[5, 6, 7], [8, 9]])
    assert set(batch) == {"input_ids", "attention_mask", "labels", *LABELLED}
    assert batch["labels"].tolist() == [[6, 7, -100], [9, -100, -100]]
    with pytest.raises(ValueError, match="objective"):
        DataCollatorForBiphasic(tiny_tokenizer("llama"), objective="both")
    no_pad = tiny_tokenizer("llama")
    no_pad.pad_token = None
    with pytest.raises(ValueError, match=r"pad_token = tokenizer.eos_token"):
        DataCollatorForBiphasic(no_pad)


def test_phase_boundaries():
    schedule = PhaseScheduleCallback.from_string("clm:0.25,mlm:0.75")
    assert schedule.boundaries(8) == [("clm", 0, 2), ("mlm", 2, 8)]
    assert [schedule.objective_at(step, 10) for step in range(10)] == ["clm"] * 3 + ["mlm"] * 7  # 2.5 rounds up
    alternating = PhaseScheduleCallback([("clm", 0.25), ("mlm", 0.25), ("clm", 0.25), ("mlm", 0.25)])
    assert [alternating.objective_at(step, 8) for step in range(8)] == ["clm", "clm", "mlm", "mlm"] * 2


@pytest.mark.parametrize(
    "text,message",
    [
        ("clm:0.25,nsp:0.75", "Unknown objective 'nsp'"),
        ("clm:0.5,mlm:0.75", "must sum to 1"),
        ("clm=1", "OBJECTIVE:FRACTION"),
    ],
)
def test_bad_phase_strings_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        PhaseScheduleCallback.from_string(text)


def training_documents(count=48, length=16):
    generator = torch.Generator().manual_seed(0)
    return [
        {"input_ids": [*torch.randint(5, VOCAB_SIZE, (length,), generator=generator).tolist(), EOS]}
        for _ in range(count)
    ]


def objectives_seen(model) -> list[str]:
    """Per forward: which objective's view reached the encoder (its mask, and whether [MASK]s were in the input)."""
    seen = []

    def record(module, args, kwargs):
        has_mask = bool((kwargs["input_ids"] == MASK_TOKEN_ID).any())
        seen.append(
            "clm"
            if kwargs["is_causal"] and not has_mask
            else "mlm"
            if not kwargs["is_causal"] and has_mask
            else "mixed"
        )

    model.model.register_forward_pre_hook(record, with_kwargs=True)
    return seen


def train(tmp_path, phases, resume=None, **arguments):
    torch.manual_seed(0)
    model = BiphasicEncoderForPreTraining(tiny_biphasic_config())
    seen = objectives_seen(model)
    settings = dict(
        output_dir=str(tmp_path),
        max_steps=8,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        logging_steps=3,
        save_strategy="steps",
        save_steps=3,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
        lr_scheduler_type="warmup_stable_decay",
        lr_scheduler_kwargs={"num_decay_steps": 2, "decay_type": "linear"},
    )
    trainer = PretrainingTrainer(
        model=model,
        args=TrainingArguments(**{**settings, **arguments}),
        train_dataset=training_documents(),
        data_collator=DataCollatorForBiphasic(tiny_tokenizer("llama")),
        callbacks=[PhaseScheduleCallback.from_string(phases)],
    )
    trainer.train(resume_from_checkpoint=resume)
    return trainer, seen


def assert_logs_follow_phases(trainer, schedule):
    logged = [record for record in trainer.state.log_history if "loss" in record]
    for record in logged:
        objective = schedule.objective_at(record["step"] - 1, trainer.state.max_steps)
        other = {"clm": "mlm_loss", "mlm": "clm_loss"}[objective]
        assert record[f"{objective}_loss"] == record["loss"] and other not in record, record
    return [record["step"] for record in logged]


@pytest.mark.parametrize("workers", [0, 2])
def test_phases_land_on_the_right_steps_with_and_without_workers(tmp_path, workers):
    trainer, seen = train(tmp_path, "clm:0.25,mlm:0.75", dataloader_num_workers=workers)
    assert seen == ["clm"] * 2 + ["mlm"] * 6
    schedule = PhaseScheduleCallback.from_string("clm:0.25,mlm:0.75")
    steps = assert_logs_follow_phases(trainer, schedule)
    assert 2 in steps  # the last CLM step closes its logging window
    assert trainer.model.objective == "mlm"


def test_a_resumed_run_continues_in_the_right_phase(tmp_path):
    _, first = train(tmp_path, "clm:0.5,mlm:0.5")
    assert first == ["clm"] * 4 + ["mlm"] * 4
    trainer, resumed = train(tmp_path, "clm:0.5,mlm:0.5", resume=str(tmp_path / "checkpoint-3"))
    assert resumed == ["clm"] + ["mlm"] * 4  # steps 3..7
    assert 4 in assert_logs_follow_phases(trainer, PhaseScheduleCallback.from_string("clm:0.5,mlm:0.5"))


def test_a_one_view_collator_is_refused_by_a_two_phase_schedule(tmp_path):
    trainer = Trainer(
        model=BiphasicEncoderForPreTraining(tiny_biphasic_config()),
        args=TrainingArguments(output_dir=str(tmp_path), max_steps=4, report_to=[], use_cpu=True),
        train_dataset=training_documents(),
        data_collator=DataCollatorForBiphasic(tiny_tokenizer("llama"), objective="mlm"),
        callbacks=[PhaseScheduleCallback()],
    )
    with pytest.raises(ValueError, match="both views"):
        trainer.train()


def test_recipe_builds_a_trainable_pfs_run(tmp_path):
    recipe = get_recipe("biphasic")
    args = PretrainArguments(
        method="biphasic",
        block_size=32,
        vocab_size=300,
        phases="clm:0.5,mlm:0.5",
        config_overrides="num_hidden_layers=1",
    )
    documents = Dataset.from_dict({"text": ["The cat sat on the mat. It was warm and the sun was out."] * 30})
    tokenizer = recipe.build_tokenizer(args, documents)
    assert (
        tokenizer.eos_token == tokenizer.sep_token and tokenizer.mask_token is not None
    )  # WordPiece: [SEP] ends documents
    dataset = recipe.build_dataset(args, tokenizer, documents)
    model = recipe.build_model(args, tokenizer)
    assert model.config.num_hidden_layers == 1 and model.config.mask_token_id == tokenizer.mask_token_id
    trainer = PretrainingTrainer(
        model=model,
        args=TrainingArguments(
            output_dir=str(tmp_path),
            max_steps=4,
            per_device_train_batch_size=2,
            report_to=[],
            use_cpu=True,
            logging_steps=1,
        ),
        train_dataset=dataset,
        data_collator=recipe.build_collator(args, tokenizer),
        callbacks=recipe.callbacks(args),
    )
    trainer.train()
    losses = [record for record in trainer.state.log_history if "loss" in record]
    assert [sorted(set(record) & {"clm_loss", "mlm_loss"}) for record in losses] == [["clm_loss"]] * 2 + [
        ["mlm_loss"]
    ] * 2


def test_recipe_refuses_a_block_longer_than_the_model():
    args = PretrainArguments(method="biphasic", block_size=4096, config_overrides="max_position_embeddings=2048")
    with pytest.raises(ValueError, match="block_size"):
        get_recipe("biphasic").build_model(args, tiny_tokenizer("llama"))


@pytest.mark.parametrize("wrapper", ["peft", "container"])
def test_the_phase_reaches_a_model_inside_a_wrapper(wrapper):
    """Trainer hands callbacks the wrapper where one is in place (a PeftModel, FSDP1's module): the switch must
    reach the biphasic model inside it, or every CLM step would silently train MLM."""
    inner = BiphasicEncoderForPreTraining(tiny_biphasic_config())
    if wrapper == "peft":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(inner, LoraConfig(target_modules=["q_proj", "v_proj"]))
    else:
        model = torch.nn.ModuleDict({"wrapped": inner})
    schedule = PhaseScheduleCallback.from_string("clm:0.5,mlm:0.5")
    state = TrainerState(max_steps=4, global_step=0)
    schedule.on_train_begin(None, state, None, model=model)
    assert inner.objective == "clm"
    state.global_step = 2
    schedule.on_step_begin(None, state, None, model=model)
    assert inner.objective == "mlm"
    state.global_step = 1  # a resumed run starts where it stopped
    schedule.on_train_begin(None, state, None, model=model)
    assert inner.objective == "clm"
    schedule.on_train_end(None, state, None, model=model)
    assert "objective" not in vars(inner) and inner.objective == "mlm", "after training: the encoder it loads as"


def test_the_phase_callback_refuses_a_model_without_objectives():
    with pytest.raises(ValueError, match=r"whose `objective` attribute picks CLM or MLM.*got ModuleDict"):
        PhaseScheduleCallback().on_train_begin(None, TrainerState(max_steps=4), None, model=torch.nn.ModuleDict())
