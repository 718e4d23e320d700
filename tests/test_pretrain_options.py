"""`hf-encoders pretrain` refuses every option the run would not read, with the reason: every PretrainArguments field
set alone for every method (a table stating independently who reads what), then the options other options make moot.
TaCL's knobs reach its config."""

from dataclasses import fields

import pytest
from transformers import AutoTokenizer, HfArgumentParser

from hf_encoders.methods import METHODS
from hf_encoders.training.arguments import PretrainArguments
from hf_encoders.training.recipe import get_recipe
from hf_encoders_cli import main
from tests.method_specs import METHOD_SPECS, built_from_scratch
from tests.tiny_models import tiny_mae_lm_config

ALL = set(METHODS)
FROM_SCRATCH = set(built_from_scratch())
# Every option but --method, a value other than its default, and the methods that read it when set alone (TaCL
# continuing its encoder, the others from scratch), besides those whose test specification lists it in `own_options`.
OPTIONS = {
    "preset": ("mae_lm-base", ALL),
    "corpus": ("corpus.txt", ALL),
    "anneal_corpus": ("books/", set()),  # read with --anneal_fraction only
    "anneal_fraction": (0.1, set()),
    "dataset_config": ("wikitext-2-raw-v1", ALL),
    "text_column": ("body", ALL),
    "streaming": (True, ALL),
    "max_documents": (10, ALL),
    "tokenizer_name": ("tokenizer/", ALL),
    "vocab_size": (500, FROM_SCRATCH),
    "model_name_or_path": ("checkpoint/", ALL),
    "from_causal_lm": ("smollm2.gguf", set()),
    "model_size": ("small", FROM_SCRATCH),
    "config_overrides": ("num_hidden_layers=1", FROM_SCRATCH),
    "attn_implementation": ("eager", ALL),
    "block_size": (64, ALL),
    "block_size_schedule": ("64:0.5,128:0.5", ALL),
    "mlm_probability": (0.3, ALL),
    "mlm_probability_schedule": ("0.3:0.9,0.15:0.1", ALL),
    "batch_size_warmup_tokens": (100_000, ALL),
    "masking": ("whole_word", ALL),
    "mask_count": ("per_token", ALL),
    "max_span_length": (5, set()),  # read with --masking span only
    "span_geometric_p": (0.5, set()),
    "pack_documents": (True, set()),
    "phases": ("mlm:1.0", set()),
    "tacl_temperature": (0.05, set()),
    "tacl_loss_weight": (0.5, set()),
    "mlm_loss_weight": (0.5, set()),
    "nsp_loss_weight": (0.0, set()),
    "use_nsp": (False, set()),
    "exclude_padding_from_contrast": (False, set()),
    "validation_split_percentage": (5.0, ALL),
    "validation_file": ("validation.txt", ALL),
    "diagnostics_steps": (100, ALL),
    "diagnostics_sentences": (16, set()),  # read with --diagnostics_steps only
    "peak_tflops": (989.0, ALL),
    "overwrite_output_dir": (True, ALL),
    "preprocessing_num_workers": (2, ALL),
    "keep_optimizer_state": (True, ALL),
    "mask_in_encoder_fraction": (0.5, set()),
    "hold_encoder_steps": (100, set()),  # read by mae_lm continuing an encoder only
    "tokenized_dir": ("cache/", ALL),
    "skip_bad_rows": (True, ALL),
    "pad_vocab_to_multiple_of": (8, FROM_SCRATCH),
    "fp8": (True, ALL),
    "ema_decay": (0.999, ALL),
    "init_from_smaller": ("small/", set()),  # mae_lm and biphasic from scratch (own_options)
}


def readers(option: str) -> set[str]:
    return OPTIONS[option][1] | {name for name, spec in METHOD_SPECS.items() if option in spec.own_options}


def named(option: str) -> str:
    """The methods that read `option`, as a refusal names them (in the method table's order)."""
    return " or ".join(name for name in METHODS if name in readers(option))


def test_the_table_covers_every_option():
    assert set(OPTIONS) == {option.name for option in fields(PretrainArguments)} - {"method"}
    claimed = {option for spec in METHOD_SPECS.values() for option in spec.own_options}
    assert claimed <= set(OPTIONS), (
        f"own_options in tests/method_specs.py that pretrain lacks: {claimed - set(OPTIONS)}"
    )


def base_arguments(method: str, bert: str, **options) -> PretrainArguments:
    start = {} if method in FROM_SCRATCH else {"model_name_or_path": bert}
    return PretrainArguments(method=method, **{**start, **options})


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("option", list(OPTIONS))
def test_an_option_is_read_or_refused_naming_it(bert, method, option):
    args = base_arguments(method, bert, **{option: OPTIONS[option][0]})
    if method in readers(option):
        get_recipe(method).check_arguments(args)
        return
    with pytest.raises(ValueError, match=f"--{option}\\b"):
        get_recipe(method).check_arguments(args)
        pytest.fail(f"--method {method} reads --{option}: list it in METHOD_SPECS[{method!r}].own_options")


@pytest.mark.parametrize(
    "method,option,message",
    [
        ("mlm", "phases", f"MLM \\(BERT baseline\\) does not read --phases; only --method {named('phases')} does"),
        ("tacl", "vocab_size", f"TaCL does not read --vocab_size; only --method {named('vocab_size')} does"),
        (
            "mae_lm",
            "tacl_temperature",
            f"MAE-LM does not read --tacl_temperature; only --method {named('tacl_temperature')} does",
        ),
        ("mae_lm", "from_causal_lm", "--from_causal_lm converts a causal LM for the biphasic method"),
        ("tacl", "pack_documents", "--pack_documents cannot be used with TaCL: TaCL trains on sentence pairs"),
        ("mlm", "max_span_length", "--max_span_length shapes the spans of --masking span, not --masking token"),
        ("biphasic", "diagnostics_sentences", "how many sentences --diagnostics_steps probes; add --diagnostics_steps"),
        ("mlm", "hold_encoder_steps", "does not read --hold_encoder_steps; only --method mae_lm does"),
        ("mae_lm", "hold_encoder_steps", "this run starts from scratch, so there is nothing to hold"),
        (
            "mlm",
            "init_from_smaller",
            "--init_from_smaller tiles a smaller checkpoint of this package's own models into a larger one, so that "
            "it computes the same outputs; MLM \\(BERT baseline\\)'s model has no such tiling. Drop it, or pre-train "
            "with --method mae_lm or biphasic",
        ),
    ],
)
def test_the_refusal_says_why(bert, method, option, message):
    with pytest.raises(ValueError, match=message):
        get_recipe(method).check_arguments(base_arguments(method, bert, **{option: OPTIONS[option][0]}))


@pytest.fixture(scope="module")
def mae_lm_checkpoint(tmp_path_factory):
    from hf_encoders.models.mae_lm import MaeLmForMaskedLM

    folder = tmp_path_factory.mktemp("mae_lm")
    MaeLmForMaskedLM(tiny_mae_lm_config()).save_pretrained(folder)
    return str(folder)


# (method, the run's options, the option set on top, the refusal or None where the run reads it)
MOOT = [
    ("mlm", {"model_name_or_path": "bert"}, {"model_size": "small"}, "--model_size sizes a model built from scratch"),
    ("mae_lm", {"model_name_or_path": "bert"}, {"model_size": "small"}, "--model_size sizes a model built from"),
    ("mae_lm", {"model_name_or_path": "bert"}, {"config_overrides": "decoder_num_hidden_layers=2"}, None),
    ("mae_lm", {"model_name_or_path": "mae_lm"}, {"config_overrides": "num_hidden_layers=1"}, "continues .* as it"),
    ("mae_lm", {"model_name_or_path": "bert"}, {"hold_encoder_steps": 100}, None),
    ("mlm", {"model_name_or_path": "bert"}, {"pad_vocab_to_multiple_of": 64}, "pads the vocabulary of a model built"),
    ("mae_lm", {"model_name_or_path": "bert"}, {"hold_encoder_steps": 0}, "must be a positive number of steps, got 0"),
    ("biphasic", {"from_causal_lm": "lm.gguf"}, {"model_size": "small"}, "--model_size sizes a model built from"),
    ("biphasic", {"from_causal_lm": "lm.gguf"}, {"tokenizer_name": "bert"}, "keeps the vocabulary of lm.gguf"),
    ("biphasic", {"from_causal_lm": "lm.gguf"}, {"vocab_size": 500}, "this run uses the tokenizer of lm.gguf"),
    ("biphasic", {"model_name_or_path": "ckpt/"}, {"phases": "clm:0.5,mlm:0.5"}, None),
    ("mlm", {"tokenizer_name": "bert"}, {"vocab_size": 500}, "--vocab_size sizes a tokenizer trained on the corpus"),
    ("mae_lm", {"masking": "span"}, {"max_span_length": 5, "span_geometric_p": 0.5}, None),
    ("mae_lm", {"masking": "whole_word"}, {"span_geometric_p": 0.5}, "not --masking whole_word"),
    ("tacl", {"diagnostics_steps": 10}, {"diagnostics_sentences": 16}, None),
    ("mae_lm", {"model_name_or_path": "mae_lm"}, {"init_from_smaller": "small/"}, "continues .*: pass one starting"),
    ("biphasic", {"from_causal_lm": "lm.gguf"}, {"init_from_smaller": "small/"}, "continues lm.gguf: pass one"),
    ("mae_lm", {"init_from_smaller": "mae_lm"}, {"model_size": "small", "config_overrides": "hidden_size=64"}, None),
    ("mae_lm", {"init_from_smaller": "mae_lm"}, {"vocab_size": 500}, "this run uses the tokenizer of .*mae_lm"),
    ("biphasic", {"init_from_smaller": "mae_lm"}, {"pad_vocab_to_multiple_of": 64}, "keeps the vocabulary of .*mae_lm"),
    ("mlm", {"mlm_probability_schedule": "0.3:0.5,0.15:0.5"}, {"mlm_probability": 0.2}, "moot with --mlm_probability_"),
    ("biphasic", {}, {"mlm_probability_schedule": "0.3:0.5,0.15:0.6"}, "fractions must sum to 1 .*got 1.1"),
    ("mae_lm", {}, {"batch_size_warmup_tokens": 0}, "must be a positive number of tokens, got 0"),
    ("tacl", {"anneal_corpus": "books/"}, {"anneal_fraction": 0.1}, None),
    ("mlm", {"anneal_fraction": 0.1}, {"streaming": True}, "--anneal_corpus and --anneal_fraction go together"),
]


@pytest.mark.parametrize("method,run,option,message", MOOT)
def test_an_option_another_makes_moot_is_refused(bert, mae_lm_checkpoint, method, run, option, message):
    checkpoints = {"bert": bert, "mae_lm": mae_lm_checkpoint}
    run = {name: checkpoints.get(value, value) for name, value in run.items()}
    args = base_arguments(method, bert, **run, **option)
    if message is None:
        get_recipe(method).check_arguments(args)
    else:
        with pytest.raises(ValueError, match=message):
            get_recipe(method).check_arguments(args)


def test_the_command_refuses_before_reading_the_corpus(bert, tmp_path):
    output_dir = tmp_path / "out"
    argv = ["pretrain", "--method", "tacl", "--model_name_or_path", bert, "--output_dir", str(output_dir)]
    with pytest.raises(ValueError, match="TaCL does not read --model_size"):
        main([*argv, "--model_size", "small", "--corpus", str(tmp_path / "missing.txt")])
    assert not output_dir.exists()


@pytest.mark.parametrize(
    "option,message",
    [
        (["--model_size", "tiny"], "--model_size sizes a model built from scratch, but MLM .* continues"),
        (["--vocab_size", "8000"], "--vocab_size sizes a tokenizer trained on the corpus, but this run uses the"),
    ],
)
def test_a_default_value_given_with_a_checkpoint_is_refused_too(bert, tmp_path, option, message):
    """Given on the command line, the default value is as moot as any other (it was taken for no option at all)."""
    argv = ["pretrain", "--method", "mlm", "--model_name_or_path", bert, "--output_dir", str(tmp_path / "out")]
    with pytest.raises(ValueError, match=message):
        main([*argv, *option])


def test_tacl_knobs_reach_its_config_and_unset_ones_keep_its_defaults(bert):
    parser = HfArgumentParser(PretrainArguments)
    argv = ["--method", "tacl", "--model_name_or_path", bert, "--tacl_temperature", "0.05", "--use_nsp", "false"]
    argv += ["--tacl_loss_weight", "0.5", "--nsp_loss_weight", "0", "--exclude_padding_from_contrast", "false"]
    (args,) = parser.parse_args_into_dataclasses(argv)
    assert (args.tacl_temperature, args.use_nsp, args.mlm_loss_weight) == (0.05, False, None)
    recipe = get_recipe("tacl")
    recipe.check_arguments(args)
    config = recipe.build_model(args, AutoTokenizer.from_pretrained(bert)).config
    assert (config.temperature, config.tacl_loss_weight, config.mlm_loss_weight, config.nsp_loss_weight) == (
        0.05,
        0.5,
        1.0,
        0.0,
    )
    assert config.use_nsp is False and config.exclude_padding_from_contrast is False
    defaults = recipe.build_model(base_arguments("tacl", bert), AutoTokenizer.from_pretrained(bert)).config
    assert (defaults.temperature, defaults.use_nsp, defaults.exclude_padding_from_contrast) == (0.01, True, True)


def test_mlm_refuses_to_continue_another_methods_checkpoint(tmp_path):
    """from_pretrained would build a fresh BERT and merely report every weight as unexpected or missing."""
    from hf_encoders import MaeLmForMaskedLM

    MaeLmForMaskedLM(tiny_mae_lm_config()).save_pretrained(tmp_path)
    args = PretrainArguments(method="mlm", model_name_or_path=str(tmp_path))
    with pytest.raises(ValueError, match="holds a 'mae_lm' model, not a 'bert' one"):
        get_recipe("mlm").build_model(args, tokenizer=None)
