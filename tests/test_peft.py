"""LoRA (peft) on every method's sequence classifier: only adapters and head train, Trainer runs, the adapters
merge back into a plain model with the same logits, and the merged model reloads through its Auto class."""

import json

import peft
import pytest
import torch
from torch import nn
from transformers import (
    AutoModelForSequenceClassification,
    EuroBertConfig,
    EuroBertForSequenceClassification,
    ModernBertForSequenceClassification,
    Trainer,
    TrainingArguments,
    default_data_collator,
)

from hf_encoders import TaclForPreTraining
from hf_encoders.lora import lora_config
from tests.method_specs import METHOD_SPECS, specs_with
from tests.tiny_models import BERT_SHAPE, VOCAB_SIZE, tiny_modernbert_config, tiny_tacl_config

NUM_LABELS = 3
LENGTH = 12


pytestmark = pytest.mark.usefixtures("one_thread")


LORA_METHODS = specs_with("lora")


def synthetic_examples(count=32, seed=0):
    """An easy task: every token of a row comes from its label's band of the vocabulary; three rows are padded."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(count) % NUM_LABELS
    band = (VOCAB_SIZE - 5) // NUM_LABELS
    input_ids = 5 + labels[:, None] * band + torch.randint(0, band, (count, LENGTH), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[-3:, -4:] = 0
    input_ids[-3:, -4:] = 0
    return [
        {"input_ids": ids, "attention_mask": mask, "labels": label}
        for ids, mask, label in zip(input_ids, attention_mask, labels)
    ]


def lora_parameter_count(model, targets, r):
    return sum(
        r * (module.in_features + module.out_features)
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and name.split(".")[-1] in targets
    )


@pytest.mark.parametrize("method", LORA_METHODS)
def test_lora_trains_with_trainer_and_merges_back(method, tmp_path):
    spec = METHOD_SPECS[method].lora
    torch.manual_seed(0)
    model = spec.classifier(tmp_path, NUM_LABELS)
    model_class = type(model)
    original = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    model.save_pretrained(tmp_path / "base")
    config = lora_config(model, r=4, alpha=8)
    targets = set(config.target_modules)
    assert sorted(config.modules_to_save) == sorted(spec.head)
    expected_lora = lora_parameter_count(model, targets, r=4)
    head_size = sum(parameter.numel() for name in spec.head for parameter in getattr(model, name).parameters())
    assert expected_lora > 0

    peft_model = peft.get_peft_model(model, config)
    trainable = {name: parameter for name, parameter in peft_model.named_parameters() if parameter.requires_grad}
    assert all(".lora_" in name or ".modules_to_save." in name for name in trainable), sorted(trainable)
    assert sum(parameter.numel() for parameter in trainable.values()) == expected_lora + head_size
    assert peft_model.get_nb_trainable_parameters()[0] == expected_lora + head_size

    examples = synthetic_examples()
    batch = default_data_collator(examples)

    def loss():
        peft_model.eval()
        with torch.no_grad():
            return peft_model(**batch).loss.item()

    loss_before = loss()
    arguments = TrainingArguments(
        output_dir=str(tmp_path / "run"),
        max_steps=20,
        per_device_train_batch_size=8,
        learning_rate=spec.learning_rate,
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    trainer = Trainer(model=peft_model, args=arguments, train_dataset=examples, data_collator=default_data_collator)
    trainer.train()
    assert all(
        not parameter.requires_grad or ".lora_" in name or ".modules_to_save." in name
        for name, parameter in peft_model.named_parameters()
    )
    loss_after = loss()
    assert loss_after < 0.8 * loss_before, (loss_before, loss_after)

    peft_model.eval()
    with torch.no_grad():
        adapted_logits = peft_model(**batch).logits
    # The adapter alone (LoRA matrices + head) reloads onto the base checkpoint.
    peft_model.save_pretrained(tmp_path / "adapter")
    base = AutoModelForSequenceClassification.from_pretrained(tmp_path / "base")
    with torch.no_grad():
        torch.testing.assert_close(
            peft.PeftModel.from_pretrained(base, tmp_path / "adapter").eval()(**batch).logits, adapted_logits
        )

    merged = peft_model.merge_and_unload().eval()
    assert type(merged) is model_class
    assert not any("lora_" in name or "modules_to_save" in name for name in merged.state_dict())
    assert merged.state_dict().keys() == original.keys()
    with torch.no_grad():
        merged_logits = merged(**batch).logits
    torch.testing.assert_close(merged_logits, adapted_logits, rtol=1e-5, atol=1e-5)

    # LoRA B started at zero and was trained: every adapted weight moved, every other encoder weight stayed put.
    merged_state = merged.state_dict()
    base_prefix = merged.base_model_prefix + "."
    for name, before in original.items():
        module_name, _, kind = name.rpartition(".")
        if not name.startswith(base_prefix):
            assert not torch.equal(merged_state[name], before), f"head weight {name} did not train"
        elif module_name.split(".")[-1] in targets and kind == "weight":
            assert not torch.equal(merged_state[name], before), f"LoRA did not change {name}"
        else:
            assert torch.equal(merged_state[name], before), f"frozen weight {name} changed"

    merged.save_pretrained(tmp_path / "merged")
    if method != "tacl":  # our models' merged checkpoints still carry their code for trust_remote_code loading
        assert (
            "AutoModelForSequenceClassification"
            in json.loads((tmp_path / "merged" / "config.json").read_text())["auto_map"]
        )
    reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path / "merged").eval()
    assert type(reloaded) is model_class
    with torch.no_grad():
        torch.testing.assert_close(reloaded(**batch).logits, merged_logits)


@pytest.mark.parametrize("method", LORA_METHODS)
def test_all_linear_adapts_every_encoder_projection_and_trains_the_head(method, tmp_path):
    """The module names docs/lora.md lists, and peft's "all-linear" leaving the head to modules_to_save."""
    spec = METHOD_SPECS[method].lora
    model = spec.classifier(tmp_path, NUM_LABELS)
    peft_model = peft.get_peft_model(model, lora_config(model, target_modules="all-linear"))
    names = [name for name, _ in peft_model.named_parameters()]
    adapted = sorted({name.split(".lora_A.")[0].rsplit(".", 1)[-1] for name in names if ".lora_A." in name})
    assert adapted == list(spec.all_linear)
    assert not any(".lora_" in name and ".modules_to_save." in name for name in names)
    head = sorted(
        {name.split(".modules_to_save.")[0].rsplit(".", 1)[-1] for name in names if ".modules_to_save." in name}
    )
    assert head == sorted(spec.head)


TINY = {**BERT_SHAPE, "num_labels": NUM_LABELS}


@pytest.mark.parametrize(
    "build, targets, head",
    [
        (
            lambda: ModernBertForSequenceClassification(tiny_modernbert_config(num_labels=NUM_LABELS)),
            ["Wqkv"],
            ["classifier", "head"],
        ),
        (
            lambda: EuroBertForSequenceClassification(EuroBertConfig(**TINY)),
            ["q_proj", "v_proj"],
            ["classifier", "dense"],
        ),
    ],
    ids=["modernbert-student", "eurobert-export"],
)
def test_other_exported_types_get_targets_and_head(build, targets, head):
    model = build()
    config = lora_config(model)
    assert sorted(config.target_modules) == targets and sorted(config.modules_to_save) == head
    peft_model = peft.get_peft_model(model, config)
    trainable = [name for name, parameter in peft_model.named_parameters() if parameter.requires_grad]
    assert any(".lora_A." in name for name in trainable)
    assert all(".lora_" in name or ".modules_to_save." in name for name in trainable), trainable


def test_unknown_model_type_asks_for_target_modules():
    class Mystery(nn.Module):
        def __init__(self):
            super().__init__()
            self.config = type("Config", (), {"model_type": "mystery"})()
            self.attn = nn.Linear(4, 4)
            self.classifier = nn.Linear(4, 2)

    with pytest.raises(ValueError, match=r"'mystery'.*Pass target_modules="):
        lora_config(Mystery())
    assert list(lora_config(Mystery(), target_modules=["attn"]).target_modules) == ["attn"]
    with pytest.raises(ValueError, match="save_student"):
        lora_config(TaclForPreTraining(tiny_tacl_config()))


def test_head_name_that_also_names_encoder_modules_is_refused():
    class BertWithDenseHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.config = type("Config", (), {"model_type": "bert"})()
            self.encoder = nn.ModuleDict({"dense": nn.Linear(4, 4)})
            self.dense = nn.Linear(4, 2)

        @property
        def base_model(self):
            return self.encoder

    with pytest.raises(ValueError, match="modules_to_save"):
        lora_config(BertWithDenseHead())
