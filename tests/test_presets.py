"""`hf-encoders pretrain --preset NAME`: each paper preset against its paper's numbers (written here from the papers,
independently of the presets' tables), the layers (parser < preset < CUDA fast path < flags given, overrides logged
and on the card), the small-run presets of a model built from scratch, and `--optim stable_adamw`."""

import pytest
from transformers import Trainer, TrainingArguments
from transformers.testing_utils import CaptureLogger

from hf_encoders import MaeLmForMaskedLM
from hf_encoders.methods import METHODS, load
from hf_encoders.training import pretrain
from hf_encoders.training.fast_path import Device
from hf_encoders.training.presets import card_lines, get_preset, presets
from hf_encoders.training.pretrain import check_optimizer, parse_arguments
from hf_encoders.training.recipe import get_recipe
from hf_encoders_cli import main
from tests.tiny_models import tiny_mae_lm_config

CPU = Device("cpu")
H100 = Device("cuda", (9, 0), "NVIDIA H100 80GB HBM3")

# The papers' numbers, by preset: option or config field -> value. TaCL: Su et al. (2022), §3. MAE-LM: Meng et al.
# (ICLR 2024), Appendix C and Appendix D, Table 3. Biphasic: Gisserot-Boukhlef et al. (2025), §2, §3, §4, §5 and
# Appendix A. "batch" is sequences per optimizer step.
TACL = {
    "batch": 256,
    "max_steps": 150_000,
    "block_size": 256,
    "tacl_temperature": 0.01,
    "learning_rate": 1e-4,
    "warmup_steps": 0.1,
}
MAE_LM_BASE = {
    "batch": 2048,
    "learning_rate": 5e-4,
    "warmup_steps": 10_000,
    "block_size": 512,
    "adam_epsilon": 1e-6,
    "adam_beta1": 0.9,
    "adam_beta2": 0.98,
    "weight_decay": 0.01,
    "mlm_probability": 0.15,
    "hidden_dropout_prob": 0.1,
    "decoder_num_hidden_layers": 4,
    "hidden_size": 768,
    "num_hidden_layers": 12,
}
BIPHASIC = {
    "batch": 2_359_296 // 2048,
    "block_size": 2048,
    "max_position_embeddings": 2048,
    "warmup_steps": 2000,
    "lr_scheduler_type": "warmup_stable_decay",
    "adam_beta1": 0.9,
    "adam_beta2": 0.95,
    "weight_decay": 0.1,
    "max_grad_norm": 1.0,
    "mlm_probability": 0.4,
}
PAPERS = {
    "tacl-bert-base": TACL,
    "mae_lm-base": {
        **MAE_LM_BASE,
        "max_steps": 125_000,
        "max_grad_norm": 2.0,
        "relative_attention_num_buckets": 32,
        "relative_attention_max_distance": 128,
        "vocab_size": 32_768,
    },
    "mae_lm-base++": {
        **MAE_LM_BASE,
        "max_steps": 2_000_000,
        "learning_rate": 2e-4,
        "max_grad_norm": 2.0,
        "relative_attention_num_buckets": 64,
        "relative_attention_max_distance": 128,
        "vocab_size": 64_000,
    },
    "mae_lm-large++": {
        **MAE_LM_BASE,
        "max_steps": 1_000_000,
        "learning_rate": 1e-4,
        "max_grad_norm": 1.0,
        "relative_attention_num_buckets": 128,
        "relative_attention_max_distance": 256,
        "vocab_size": 64_000,
        "hidden_size": 1024,
        "num_hidden_layers": 24,
    },
    "biphasic-210m": {
        **BIPHASIC,
        "max_steps": 42_000,
        "phases": "clm:0.25,mlm:0.75",
        "vocab_size": 128_256,
        "num_hidden_layers": 12,
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_attention_heads": 12,
        "num_key_value_heads": 12,
    },
    "biphasic-610m": {
        **BIPHASIC,
        "max_steps": 42_000,
        "phases": "clm:0.25,mlm:0.75",
        "num_hidden_layers": 26,
        "hidden_size": 1152,
        "intermediate_size": 4096,
        "num_attention_heads": 18,
        "num_key_value_heads": 6,
    },
    "biphasic-1b": {
        **BIPHASIC,
        "max_steps": 42_000,
        "phases": "clm:0.25,mlm:0.75",
        "num_hidden_layers": 28,
        "hidden_size": 1728,
        "intermediate_size": 5120,
        "num_attention_heads": 18,
        "num_key_value_heads": 6,
    },
    "biphasic-610m-cpt": {**BIPHASIC, "max_steps": 22_000, "phases": "mlm:1.0", "hidden_size": 1152},
}


def preset_value(preset, key):
    if key == "batch":
        return preset.batch_size
    return preset.options[key] if key in preset.options else preset.config[key]


def test_every_paper_preset_is_checked_here():
    assert set(presets(small=False)) == set(PAPERS)


@pytest.mark.parametrize("name", sorted(PAPERS))
def test_each_preset_holds_its_papers_numbers_each_with_its_source(name):
    preset = get_preset(name)
    for key, number in PAPERS[name].items():
        assert preset_value(preset, key).value == number, (name, key)
    for item in [preset.batch_size, *preset.options.values(), *preset.config.values()]:
        assert any(mark in item.source for mark in ("§", "App.", "not in the paper")), item


def test_biphasic_decays_linearly_over_five_percent_of_the_steps():
    """§2: the last 2,000 of 42,000 steps, linear; Appendix A: decay steps 5% (of CPT's 22,000: 1,100)."""
    for name, decay in (("biphasic-210m", 2000), ("biphasic-610m-cpt", 1100)):
        kwargs = get_preset(name).value("lr_scheduler_kwargs")
        assert kwargs == {"num_decay_steps": decay, "decay_type": "linear"}


def test_the_preset_sets_method_model_and_training_and_the_accumulation_of_the_papers_batch(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "8")
    args, training_args = parse_arguments(["--preset", "mae_lm-base", "--output_dir", str(tmp_path)], device=CPU)
    assert args.method == "mae_lm" and args.preset == "mae_lm-base" and args.block_size == 512
    assert training_args.learning_rate == 5e-4 and training_args.max_steps == 125_000
    assert "relative_attention_num_buckets=32" in args.config_overrides
    # 2,048 sequences = 64 per GPU x 8 GPUs x 4.
    assert (training_args.per_device_train_batch_size, training_args.gradient_accumulation_steps) == (64, 4)


def test_a_flag_given_wins_and_is_logged_as_an_override_and_named_on_the_card(tmp_path):
    argv = ["--preset", "mae_lm-base", "--output_dir", str(tmp_path), "--learning_rate", "1e-4"]
    argv += ["--lr_scheduler_type", "cosine"]
    args, training_args = parse_arguments([*argv, "--config_overrides", "num_hidden_layers=6"], device=CPU)
    with CaptureLogger(pretrain.logger) as log:
        pretrain.log_preset(args, training_args)
    assert training_args.learning_rate == 1e-4 and training_args.warmup_steps == 10_000
    # The preset's config fields stay, but the one given.
    assert "num_hidden_layers=6" in args.config_overrides and "hidden_size=768" in args.config_overrides
    assert "learning_rate=0.0001 (preset: 0.0005)" in log.out and "num_hidden_layers=6 (preset: 12)" in log.out
    assert "lr_scheduler_type=cosine (preset: linear)" in log.out
    assert "Plan of mae_lm-base" in log.out
    lines = card_lines(args, training_args)
    assert lines[0].startswith("- preset: mae_lm-base") and "learning_rate=0.0001 (preset: 0.0005)" in lines[1]


def test_tacls_preset_continues_bert_base_with_nothing_left_out(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "1")
    with CaptureLogger(pretrain.logger) as log:
        args, training_args = parse_arguments(["--preset", "tacl-bert-base", "--output_dir", str(tmp_path)], device=CPU)
    assert (args.method, args.model_name_or_path, args.tacl_temperature) == ("tacl", "bert-base-uncased", 0.01)
    assert training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps == 256
    assert "left out" not in log.out


def test_the_cuda_fast_path_sits_above_the_preset_and_a_flag_above_both(tmp_path):
    base = ["--preset", "biphasic-210m", "--output_dir", str(tmp_path), "--use_cpu"]
    _, training_args = parse_arguments(base, device=H100)
    assert training_args.bf16 and training_args.optim.value == "adamw_torch_fused"
    assert training_args.adam_beta2 == 0.95
    _, training_args = parse_arguments([*base, "--optim", "adamw_torch", "--adam_beta2", "0.99"], device=H100)
    assert training_args.optim.value == "adamw_torch" and training_args.adam_beta2 == 0.99


def test_a_preset_value_the_run_makes_moot_is_left_out_with_the_reason(tmp_path):
    argv = ["--preset", "mae_lm-base", "--output_dir", str(tmp_path), "--tokenizer_name", "some/tokenizer"]
    with CaptureLogger(pretrain.logger) as log:
        args, _ = parse_arguments(argv, device=CPU)
    assert args.vocab_size is None
    assert "The preset's --vocab_size 32768 is left out" in log.out


def test_bad_presets_get_one_line(tmp_path, capsys):
    out = ["--output_dir", str(tmp_path)]
    with pytest.raises(ValueError, match=r"^Unknown --preset 'mae_lm-huge'; choose one of mae_lm-base, "):
        parse_arguments(["--preset", "mae_lm-huge", *out], device=CPU)
    with pytest.raises(ValueError, match="--preset mae_lm-base trains --method mae_lm, not biphasic: drop --method"):
        parse_arguments(["--preset", "mae_lm-base", "--method", "biphasic", *out], device=CPU)
    with pytest.raises(ValueError, match="--preset biphasic-610m-cpt needs --from_causal_lm"):
        parse_arguments(["--preset", "biphasic-610m-cpt", *out], device=CPU)


def test_a_model_from_scratch_without_optimisation_flags_gets_its_small_run_preset(tmp_path):
    out = ["--output_dir", str(tmp_path)]
    for method in ("mlm", "mae_lm", "biphasic"):
        small = load(METHODS[method].small_runs)
        args, training_args = parse_arguments(["--method", method, "--model_size", "small", *out], device=CPU)
        with CaptureLogger(pretrain.logger) as log:
            pretrain.log_preset(args, training_args)
        assert args.preset == f"{method}-small" and f"Preset {method}-small" in log.out
        assert training_args.learning_rate == small["small"]["learning_rate"].value
        assert training_args.warmup_steps == small["small"]["warmup_steps"].value
        assert (training_args.per_device_train_batch_size, args.block_size) == (32, 64)
    args, _ = parse_arguments(["--method", "mae_lm", *out], device=CPU)
    assert args.preset == "mae_lm-tiny"


def test_a_block_size_schedule_leaves_the_small_run_presets_block_size_out(tmp_path):
    argv = ["--method", "mlm", "--output_dir", str(tmp_path), "--block_size_schedule", "32:0.5,128:0.5"]
    args, training_args = parse_arguments([*argv, "--max_steps", "10"], device=CPU)
    assert args.preset == "mlm-tiny" and args.block_size == 128  # the schedule's longest, not the preset's 64
    with CaptureLogger(pretrain.logger) as log:
        pretrain.fit_preset(get_preset("mlm-tiny"), {"block_size_schedule": "32:0.5,128:0.5"}, args, training_args)
    assert "The preset's --block_size 64 is left out: --block_size_schedule sets it." in log.out


@pytest.mark.parametrize("flags", [[], ["--learning_rate", "1e-3"]])
def test_a_tiny_or_small_mae_lm_has_the_decoder_options_whoever_sets_the_rate(tmp_path, wordpiece_tokenizer, flags):
    """The decoder options are part of MAE-LM's tiny and small sizes, not of their small-run presets: a run that sets
    its own rate keeps them; the paper's base size has the paper's decoder; --config_overrides replaces them."""
    recipe = get_recipe("mae_lm")

    def decoder_options(*more):
        args, _ = parse_arguments(["--method", "mae_lm", "--output_dir", str(tmp_path), *flags, *more], device=CPU)
        config = recipe.build_model(args, wordpiece_tokenizer).config
        return config.decoder_locality_slope, config.decoder_value_init_std

    assert decoder_options() == (1.0, 0.2)
    assert decoder_options("--model_size", "small") == (1.0, 0.1)
    assert decoder_options("--model_size", "base", "--config_overrides", "num_hidden_layers=1") == (0.0, None)
    assert decoder_options("--config_overrides", "decoder_locality_slope=0.5") == (0.5, 0.2)


@pytest.mark.parametrize(
    "flags",
    [["--learning_rate", "1e-3"], ["--warmup_steps", "5"], ["--lr_scheduler_type", "cosine"]],
)
def test_an_optimisation_flag_or_a_checkpoint_keeps_the_small_run_preset_out(tmp_path, flags):
    args, training_args = parse_arguments(["--method", "mae_lm", "--output_dir", str(tmp_path), *flags], device=CPU)
    assert args.preset is None and args.model_size is None
    assert training_args.learning_rate == (1e-3 if "--learning_rate" in flags else 5e-5)  # Trainer's own default


def test_a_continued_model_gets_no_small_run_preset(tmp_path):
    argv = ["--method", "mae_lm", "--output_dir", str(tmp_path), "--model_name_or_path", "checkpoint/"]
    args, training_args = parse_arguments(argv, device=CPU)
    assert args.preset is None and training_args.warmup_steps == 0


def test_stable_adamw_is_transformers_optim_from_torch_optimi(tmp_path):
    optimi = pytest.importorskip("optimi")
    model = MaeLmForMaskedLM(tiny_mae_lm_config())
    arguments = TrainingArguments(str(tmp_path), optim="stable_adamw", use_cpu=True, report_to="none")
    check_optimizer(arguments)
    trainer = Trainer(model=model, args=arguments)
    assert isinstance(trainer.create_optimizer(), optimi.StableAdamW)


def test_stable_adamw_without_torch_optimi_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setattr(pretrain, "is_torch_optimi_available", lambda: False)
    arguments = TrainingArguments(str(tmp_path), optim="stable_adamw", use_cpu=True, report_to="none")
    with pytest.raises(
        ValueError, match=r"^--optim stable_adamw needs torch-optimi: pip install 'hf-encoders\[stable\]'\.$"
    ):
        check_optimizer(arguments)


def test_the_console_reports_an_unknown_preset_on_one_line(tmp_path):
    with pytest.raises(ValueError, match="Unknown --preset"):
        main(["pretrain", "--preset", "bert-huge", "--output_dir", str(tmp_path)])


def test_a_run_of_a_preset_shrunk_by_its_flags_names_the_preset_and_overrides_on_its_card(tmp_path):
    tiny = "hidden_size=64,num_hidden_layers=2,num_attention_heads=2,intermediate_size=128,decoder_num_hidden_layers=1"
    argv = ["pretrain", "--preset", "mae_lm-base", "--output_dir", str(tmp_path), "--use_cpu"]
    argv += ["--config_overrides", tiny, "--max_steps", "2", "--block_size", "32", "--max_documents", "20"]
    argv += ["--per_device_train_batch_size", "2", "--gradient_accumulation_steps", "1", "--vocab_size", "300"]
    assert main([*argv, "--report_to", "none", "--save_strategy", "no", "--disable_tqdm", "true"]) == 0
    card = (tmp_path / "README.md").read_text()
    assert "- preset: mae_lm-base (the base setting" in card
    assert "max_steps=2 (preset: 125000)" in card and "hidden_size=64 (preset: 768)" in card
    assert "batch of 2 sequences per step (preset: 2048)" in card
    assert "relative_attention_max_distance" not in card.split("overrides of the preset")[1].split("\n")[0]


def test_the_plan_line_a_run_logs_is_the_runs_own(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "1")
    argv = ["--preset", "biphasic-210m", "--output_dir", str(tmp_path), "--max_steps", "100", "--block_size", "1024"]
    args, training_args = parse_arguments(argv, device=CPU)
    with CaptureLogger(pretrain.logger) as log:
        pretrain.log_preset(args, training_args)
    # 1,152 sequences a step (6 per GPU x 192 accumulated) of 1,024 tokens, for 100 steps.
    assert f"(100 steps of {1152 * 1024:,})" in log.out and "micro-batch 6 x 192 accumulation" in log.out


def test_cpt_continues_the_causal_lm_given_without_the_presets_shape(tmp_path):
    argv = ["--preset", "biphasic-610m-cpt", "--from_causal_lm", "lm.gguf", "--output_dir", str(tmp_path)]
    with CaptureLogger(pretrain.logger) as log:
        args, training_args = parse_arguments(argv, device=CPU)
    assert args.config_overrides is None and args.phases == "mlm:1.0" and training_args.max_steps == 22_000
    assert "model shape is left out: this run continues lm.gguf" in log.out
    with CaptureLogger(pretrain.logger) as log:
        pretrain.log_preset(args, training_args)
    assert "no overrides" in log.out and "Plan of" not in log.out
