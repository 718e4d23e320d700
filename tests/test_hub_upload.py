"""What a Hub push uploads is complete: code, config with the full auto_map, safetensors weights, tokenizer and
card, also for the checkpoints Trainer pushes mid-training. The upload is replaced by a local copy that applies
Trainer's own ignore patterns, and that "Hub" folder is then loaded the way the Hub would serve it."""

import fnmatch
import os
import shutil
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import transformers.utils.hub
from huggingface_hub import ModelCard
from transformers import AutoModelForMaskedLM, Trainer, TrainingArguments

from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.callbacks import CompleteUploadCallback
from hf_encoders.training.cards import write_model_card
from hf_encoders.training.hub import stage_checkpoint_model
from hf_encoders.training.pretrain import pretrain
from hf_encoders.training.recipe import get_recipe
from tests.helpers import auto_map_classes, model_folder_files, run_in_fresh_process
from tests.method_specs import TINY_CONFIGS
from tests.tiny_models import MASK_TOKEN_ID, sample_batch, tiny_tokenizer


class LocalHub:
    """Stands in for `HfApi`: `upload_folder` copies what Trainer would upload into `root` (main) or, for another
    revision, into `root@<branch>`, which `create_branch` makes as a copy of main, as the Hub does."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def folder(self, revision: str | None = None) -> Path:
        return self.root if revision in (None, "main") else self.root.with_name(f"{self.root.name}@{revision}")

    def create_repo(self, repo_id, **kwargs):
        return SimpleNamespace(repo_id=repo_id)

    def create_branch(self, repo_id, *, branch, exist_ok=False, **kwargs):
        if self.folder(branch).exists():
            assert exist_ok, f"branch {branch} exists"
            return
        shutil.copytree(self.root, self.folder(branch))

    def upload_folder(
        self, folder_path, ignore_patterns=(), path_in_repo=None, run_as_future=False, revision=None, **kwargs
    ):
        for file in Path(folder_path).rglob("*"):
            relative = file.relative_to(folder_path)
            if file.is_file() and not any(
                fnmatch.fnmatch(part, pattern) for part in relative.parts for pattern in ignore_patterns
            ):
                target = self.folder(revision) / (path_in_repo or "") / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(file, target)
        done = Future()
        done.set_result(None)
        return done if run_as_future else None


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """transformers' shared Hub client (what Trainer and hf_encoders push with), replaced by a LocalHub."""
    local = LocalHub(tmp_path / "hub")
    monkeypatch.setattr(transformers.utils.hub, "_hf_api", local)
    return local


def training_examples(method: str) -> list[dict]:
    batch = sample_batch(batch_size=4)
    labels = torch.where(batch["input_ids"] == MASK_TOKEN_ID, 7, -100)
    examples = [
        {"input_ids": ids, "attention_mask": mask, "labels": label}
        for ids, mask, label in zip(batch["input_ids"], batch["attention_mask"], labels)
    ]
    if method == "tacl":
        for example in examples:
            example.update(token_type_ids=torch.zeros_like(example["input_ids"]), next_sentence_label=torch.tensor(0))
    return examples


@pytest.mark.parametrize("method", sorted(TINY_CONFIGS))
def test_a_mid_training_push_uploads_a_complete_loadable_checkpoint(method, tmp_path, hub):
    """Each method's pre-training model (its AutoModelForPreTraining class) as `hf-encoders pretrain` pushes it."""
    config = TINY_CONFIGS[method]()
    auto_class, model_class = next(pair for pair in auto_map_classes(config) if pair[0] == "AutoModelForPreTraining")
    torch.manual_seed(0)
    model = model_class(config)
    write_card = partial(
        write_model_card, recipe=get_recipe(method), args=PretrainArguments(method=method), model_id="someone/tiny"
    )
    trainer = Trainer(
        model=model,
        # push_to_hub with the default hub_strategy: Trainer pushes from the checkpoint it has just saved.
        args=TrainingArguments(
            output_dir=str(tmp_path / "out"),
            max_steps=1,
            save_steps=1,
            report_to="none",
            use_cpu=True,
            push_to_hub=True,
            hub_model_id="someone/tiny",
        ),
        train_dataset=training_examples(method),
        processing_class=tiny_tokenizer(),
        callbacks=[CompleteUploadCallback(write_card)],
    )
    trainer.train()

    uploaded = {path.name for path in hub.root.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= uploaded
    assert {name for name in uploaded if name.endswith(".py")} == model_folder_files(type(model))
    assert not any(name.endswith((".bin", ".pt", ".pth")) and name != "training_args.bin" for name in uploaded)
    card = ModelCard.load(hub.root / "README.md")
    assert card.data.library_name == "transformers" and {"hf-encoders", method} <= set(card.data.tags)
    assert card.data.pipeline_tag == get_recipe(method).pipeline_tag  # TaCL's training state runs in no pipeline
    assert "someone/tiny" in card.text and "optimizer steps: 1" in card.text

    model.eval()
    batch = sample_batch()
    results = run_in_fresh_process([(auto_class, str(hub.root))], batch, tmp_path)
    with torch.no_grad():
        expected = model(**batch).logits
    torch.testing.assert_close(results["0"], expected)


def pretrain_and_push(tmp_path, **schedule):
    """A tiny `hf-encoders pretrain --method mae_lm --push_to_hub` run, checkpoints on `schedule`."""
    args = PretrainArguments(method="mae_lm", max_documents=40, block_size=32, vocab_size=200)
    training_args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        push_to_hub=True,
        hub_model_id="someone/tiny-mae-lm",
        **schedule,
    )
    return pretrain(args, training_args)


def test_every_checkpoint_is_pushed_to_a_branch_named_after_its_step(tmp_path, hub):
    """`from_pretrained(repo, revision="step-2")` gets the model as it was at step 2, with its card; main gets the
    final model, and no branch carries the optimizer state."""
    result = pretrain_and_push(tmp_path, max_steps=4, save_steps=2)
    for step in (2, 4):
        branch = hub.folder(f"step-{step}")
        assert {"config.json", "model.safetensors", "tokenizer.json", "modeling_mae_lm.py"} <= set(os.listdir(branch))
        assert not {"optimizer.pt", "scheduler.pt"} & set(os.listdir(branch))
        checkpoint = result.output_dir / f"checkpoint-{step}"
        pushed, saved = (AutoModelForMaskedLM.from_pretrained(folder).state_dict() for folder in (branch, checkpoint))
        torch.testing.assert_close(pushed, saved)
        assert f"optimizer steps: {step}" in (branch / "README.md").read_text()
        assert "someone/tiny-mae-lm" in (branch / "README.md").read_text()
    first, last = (AutoModelForMaskedLM.from_pretrained(hub.folder(f"step-{step}")) for step in (2, 4))
    assert not torch.equal(first.lm_head.dense.weight, last.lm_head.dense.weight)  # two steps apart
    torch.testing.assert_close(AutoModelForMaskedLM.from_pretrained(hub.root).state_dict(), last.state_dict())
    assert not list(result.output_dir.glob("_step-*"))  # the staged copies are gone once uploaded


@pytest.mark.parametrize("links", [True, False])
def test_a_staged_checkpoint_holds_the_model_and_outlives_the_checkpoint(links, tmp_path, monkeypatch):
    def no_hard_links(source, target):
        raise OSError(f"{target}: hard links are not supported here")

    if not links:  # a file system without hard links: the files are copied instead
        monkeypatch.setattr(os, "link", no_hard_links)
    checkpoint = tmp_path / "checkpoint-7"
    checkpoint.mkdir()
    names = ["config.json", "model.safetensors", "trainer_state.json", "optimizer.pt", "rng_state_1.pth", "README.md"]
    for name in names:
        (checkpoint / name).write_text(name)
    staged = stage_checkpoint_model(checkpoint, tmp_path / "_step-7")
    shutil.rmtree(checkpoint)  # what save_total_limit does while the upload runs
    assert {file.name: file.read_text() for file in staged.iterdir()} == {
        name: name for name in ("config.json", "model.safetensors", "trainer_state.json")
    }


class HubRefusingBranches(LocalHub):
    def upload_folder(self, folder_path, revision=None, **kwargs):
        if revision not in (None, "main"):
            raise ConnectionError("the Hub is having a bad day")
        return super().upload_folder(folder_path, revision=revision, **kwargs)


def test_a_failed_branch_push_is_reported_and_the_run_still_ends_properly(tmp_path, monkeypatch, caplog):
    hub = HubRefusingBranches(tmp_path / "hub")
    monkeypatch.setattr(transformers.utils.hub, "_hf_api", hub)
    with caplog.at_level("WARNING"):
        result = pretrain_and_push(tmp_path, max_steps=2, save_steps=1)
    assert "Could not push step-1 to someone/tiny-mae-lm (the Hub is having a bad day)" in caplog.text
    assert (result.output_dir / "README.md").exists() and (hub.root / "model.safetensors").exists()  # final push
    assert not list(result.output_dir.glob("_step-*"))
