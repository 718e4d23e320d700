"""Training features every method supports through Transformers' own switches: activation checkpointing
(`GradientCheckpointingLayer`), the attention implementations (eager, sdpa; flex for biphasic, as Llama, and for
MAE-LM in tests/test_long_context.py), and the frozen TaCL teacher's memory."""

import pytest
import torch
from transformers import PreTrainedModel

from hf_encoders.training.pretrain import build_trainer
from hf_encoders_cli import main
from tests.helpers import tiny_run_arguments, tiny_training_arguments
from tests.method_specs import METHOD_SPECS, specs_with
from tests.tiny_models import MASK_TOKEN_ID, sample_batch

# Dropout off, so that checkpointing's recomputed forward is the same function as the first one.
MODELS = {name: METHOD_SPECS[name].dropout_free_model for name in specs_with("dropout_free_model")}


def training_batch(method: str) -> dict:
    batch = sample_batch()
    batch["labels"] = torch.where(batch["input_ids"] == MASK_TOKEN_ID, 7, -100)
    if method == "tacl":
        batch["next_sentence_label"] = torch.tensor([0, 1])
    return batch


def gradients(model, batch) -> dict[str, torch.Tensor]:
    model.zero_grad()
    model(**batch).loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("method", sorted(MODELS))
def test_activation_checkpointing_gives_the_same_gradients(method):
    torch.manual_seed(0)
    model = MODELS[method]().train()
    batch = training_batch(method)
    plain = gradients(model, batch)
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    checkpointed_layers = [m for m in model.modules() if getattr(m, "gradient_checkpointing", False)]
    assert checkpointed_layers, "no layer switched to gradient checkpointing"
    checkpointed = gradients(model, batch)
    assert plain.keys() == checkpointed.keys() and plain
    for name, gradient in plain.items():
        torch.testing.assert_close(checkpointed[name], gradient, msg=name)


@pytest.mark.parametrize("method", sorted(MODELS))
def test_eager_and_sdpa_train_alike(method, monkeypatch):
    torch.manual_seed(0)
    model = MODELS[method]().train()
    batch = training_batch(method)
    sdpa_calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def counted_sdpa(*args, **kwargs):
        sdpa_calls.append(1)
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counted_sdpa)
    losses = {}
    for implementation in ("eager", "sdpa"):
        model.set_attn_implementation(implementation)
        sdpa_calls.clear()
        losses[implementation] = model(**batch).loss
        # The switch reached every attention layer: else one kernel computed both losses and they agree regardless.
        assert bool(sdpa_calls) == (implementation == "sdpa"), f"{implementation}: {len(sdpa_calls)} sdpa calls"
    torch.testing.assert_close(losses["eager"], losses["sdpa"])


def test_mae_lm_refuses_flash_attention_that_cannot_take_its_relative_bias():
    model = MODELS["mae_lm"]()
    with pytest.raises(ValueError, match=r"relative position bias, one per head.*Use 'sdpa' \(the default"):
        model.set_attn_implementation("flash_attention_2")


def test_pretrain_refuses_flash_attention_for_mae_lm_with_the_models_reason(bert, tmp_path):
    argv = ["pretrain", "--method", "mae_lm", "--tokenizer_name", bert, "--max_documents", "10", "--block_size", "32"]
    with pytest.raises(ValueError, match=r"MAE-LM cannot run with attn_implementation='flash_attention_2': every"):
        main([*argv, "--attn_implementation", "flash_attention_2", "--output_dir", str(tmp_path), "--use_cpu"])


@pytest.mark.parametrize("method", ["mlm", "tacl"])
def test_pretrain_attn_implementation_reaches_every_attention_layer(method, bert, tmp_path, monkeypatch):
    """TaCL's teacher too, which set_attn_implementation reaches as a sub-model; not saved in the config, which says
    what the model is."""
    args = tiny_run_arguments(method, bert, attn_implementation="eager", validation_split_percentage=None)
    trainer = build_trainer(args, tiny_training_arguments(tmp_path, max_steps=1, eval_strategy="no"))
    configs = [module.config for module in trainer.model.modules() if isinstance(module, PreTrainedModel)]
    assert {config._attn_implementation for config in configs} == {"eager"}
    sdpa = torch.nn.functional.scaled_dot_product_attention
    sdpa_calls = []
    monkeypatch.setattr(
        torch.nn.functional, "scaled_dot_product_attention", lambda *a, **k: sdpa_calls.append(1) or sdpa(*a, **k)
    )
    trainer.train()
    assert not sdpa_calls
    trainer.save_model()
    assert "attn_implementation" not in (tmp_path / "config.json").read_text()


@pytest.mark.slow
def test_biphasic_runs_flex_attention_in_both_objectives():
    """Llama's mask builders give flex_attention a causal or a bidirectional BlockMask (with padding); on CPU
    flex_attention is compiled by inductor (about 30 s)."""
    torch.manual_seed(0)
    model = MODELS["biphasic"]().eval()
    batch = sample_batch()
    real = batch["attention_mask"].bool()
    for objective in ("mlm", "clm"):
        logits = {}
        for implementation in ("sdpa", "flex_attention"):
            model.set_attn_implementation(implementation)
            with torch.no_grad():
                logits[implementation] = model(**batch, objective=objective).logits
        torch.testing.assert_close(logits["flex_attention"][real], logits["sdpa"][real], msg=objective)


def test_the_tacl_teacher_holds_no_memory_for_backward():
    """Autograd saves nothing while the teacher runs: its activations are freed layer by layer, as in inference.
    (Only its last states, which the contrastive loss reads, live until the backward.) Its weights are frozen and
    its input is token ids, so grad mode alone decides: the hook below makes its embeddings' output require a
    gradient, as `enable_input_require_grads` (PEFT, reentrant checkpointing) does for an encoder's embeddings."""
    model = MODELS["tacl"]().train()
    model.teacher.get_input_embeddings().register_forward_hook(lambda module, inputs, output: output.requires_grad_())
    saved_in = {"teacher": 0, "student": 0}
    running = []
    for name, module in (("teacher", model.teacher), ("student", model.student.base_model)):
        module.register_forward_pre_hook(lambda *_, name=name: running.append(name))
        module.register_forward_hook(lambda *_: running.pop() and None)  # a hook's return value replaces the output

    def pack(tensor):
        if running:
            saved_in[running[-1]] += tensor.untyped_storage().nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = model(**training_batch("tacl")).loss
    loss.backward()
    assert saved_in["student"] > 0, "the hooks saw nothing"
    assert saved_in["teacher"] == 0
