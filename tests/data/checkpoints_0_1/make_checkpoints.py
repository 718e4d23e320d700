"""Writes the frozen hf-encoders 0.1.0 checkpoints next to this file. Kept for the record: do NOT re-run it
against a newer hf_encoders, the whole point of these folders is that they were written by the old code.

They were generated with the 0.1.0 code (commit dadff72), imported from a pristine checkout of that commit through
PYTHONPATH (an editable install would otherwise import the newer working tree; the script prints which
hf_encoders it imported), offline, with torch 2.13.0 (CPU), transformers 5.23.0 and tokenizers 0.23.3:

    git worktree add /tmp/old_main dadff72
    cd /tmp && HF_HUB_OFFLINE=1 PYTHONPATH=/tmp/old_main python PATH/TO/tests/data/checkpoints_0_1/make_checkpoints.py
    git worktree remove /tmp/old_main

It writes next to itself, wherever it is run from, and refuses an hf_encoders other than 0.1.0.

Each folder is a `save_pretrained` checkpoint (weights, config.json with the full auto_map, and the family's model
code copied by transformers, which a process without hf_encoders runs with `trust_remote_code=True`) plus the tiny
tokenizer, and `expected.pt`: the input batch and the outputs the 0.1.0 code computed on it in eval mode, reloading
the folder with each Auto class listed in CASES (tests/test_old_checkpoints.py holds the same table).

* mae_lm/              MaeLmForMaskedLM
* biphasic_clm_phase/  BiphasicEncoderForPreTraining saved during the CLM phase: config.objective == "clm" (what
                       PhaseScheduleCallback.on_step_begin set) and mlm_probability == 0.3. Its outputs are stored
                       with objective "clm" and "mlm" passed explicitly and with the default (0.1.0: the config's "clm").
* biphasic_classifier/ BiphasicEncoderForSequenceClassification, 3 labels
* tacl/                TaclForPreTraining around a tiny BERT student (so NSP is on)

The sizes are tests/tiny_models.py's at 0.1.0, copied here. After initialisation every parameter gets N(0, 0.02)
noise (norm weights, biases and the TaCL teacher included), so it no longer holds its initial value and a loader
that silently skips or re-initialises any weight changes the outputs.
"""

import json
from pathlib import Path

import torch
import transformers
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit
from transformers import BertConfig, PreTrainedTokenizerFast

import hf_encoders

HERE = Path(__file__).resolve().parent
VOCAB_SIZE = 64
MASK_TOKEN_ID = 4

# folder -> [(Auto class, forward kwargs, output fields)]; the expected.pt key is `output_key(...)`.
CASES = {
    "mae_lm": [
        ("AutoModelForMaskedLM", {}, ("logits", "encoder_last_hidden_state")),
        ("AutoModel", {}, ("last_hidden_state",)),
    ],
    "biphasic_clm_phase": [
        ("AutoModelForPreTraining", {}, ("logits",)),  # the 0.1.0 default: config.objective, here "clm"
        ("AutoModelForPreTraining", {"objective": "clm"}, ("logits",)),
        ("AutoModelForPreTraining", {"objective": "mlm"}, ("logits",)),
        ("AutoModelForMaskedLM", {}, ("logits",)),
        ("AutoModel", {}, ("last_hidden_state",)),
    ],
    "biphasic_classifier": [
        # Not AutoModel: the encoder class refuses a classifier's head weights as unexpected (strict loading).
        ("AutoModelForSequenceClassification", {}, ("logits",)),
    ],
    "tacl": [
        ("AutoModelForPreTraining", {}, ("logits", "seq_relationship_logits", "last_hidden_state")),
    ],
}


def output_key(auto_class: str, forward_kwargs: dict, field: str) -> str:
    """'AutoModelForPreTraining(objective=mlm).logits'"""
    arguments = ",".join(f"{name}={value}" for name, value in sorted(forward_kwargs.items()))
    return f"{auto_class}({arguments}).{field}" if arguments else f"{auto_class}.{field}"


def sample_batch(seed: int = 0, batch_size: int = 2, length: int = 12) -> dict[str, torch.Tensor]:
    """tests/tiny_models.sample_batch at 0.1.0: a few [MASK]s and one padded row tail."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, VOCAB_SIZE, (batch_size, length), generator=generator)
    input_ids[:, 3] = MASK_TOKEN_ID
    input_ids[0, 7] = MASK_TOKEN_ID
    attention_mask = torch.ones_like(input_ids)
    attention_mask[-1, length - 3 :] = 0
    input_ids[-1, length - 3 :] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """[PAD] [UNK] [CLS] [SEP] [MASK] w5 ... w63 (whitespace words)."""
    vocab = {
        "[PAD]": 0,
        "[UNK]": 1,
        "[CLS]": 2,
        "[SEP]": 3,
        "[MASK]": MASK_TOKEN_ID,
        **{f"w{i}": i for i in range(5, VOCAB_SIZE)},
    }
    backend = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


def tiny_mae_lm_config() -> hf_encoders.MaeLmConfig:
    return hf_encoders.MaeLmConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        decoder_num_hidden_layers=1,
        max_position_embeddings=64,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
        pad_token_id=0,
        mask_token_id=MASK_TOKEN_ID,
        num_labels=3,
    )


def tiny_biphasic_config(**overrides) -> hf_encoders.BiphasicConfig:
    settings = dict(
        vocab_size=VOCAB_SIZE,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        mask_token_id=MASK_TOKEN_ID,
        num_labels=3,
    )
    return hf_encoders.BiphasicConfig(**{**settings, **overrides})


def tiny_tacl_config() -> hf_encoders.TaclConfig:
    student_config = BertConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        pad_token_id=0,
    )
    return hf_encoders.TaclConfig(student_config=student_config)


def build_models() -> dict[str, torch.nn.Module]:
    models = {"mae_lm": hf_encoders.MaeLmForMaskedLM(tiny_mae_lm_config())}
    # A checkpoint saved in the CLM phase: PhaseScheduleCallback.on_step_begin had set config.objective = "clm".
    clm_phase = hf_encoders.BiphasicEncoderForPreTraining(tiny_biphasic_config(mlm_probability=0.3))
    clm_phase.config.objective = "clm"
    models["biphasic_clm_phase"] = clm_phase
    models["biphasic_classifier"] = hf_encoders.BiphasicEncoderForSequenceClassification(tiny_biphasic_config())
    models["tacl"] = hf_encoders.TaclForPreTraining(tiny_tacl_config())
    assert models["tacl"].config.use_nsp
    return models


def perturb(model: torch.nn.Module) -> None:
    with torch.no_grad():
        for parameter in model.parameters():  # tied weights are one parameter, so they stay tied
            parameter.add_(0.02 * torch.randn_like(parameter))


def run(model, batch: dict, forward_kwargs: dict) -> dict:
    with torch.no_grad():
        return model(**batch, **forward_kwargs)


def main() -> None:
    assert hf_encoders.__version__ == "0.1.0", (
        f"run against hf_encoders 0.1.0 (commit dadff72), got {hf_encoders.__version__}"
    )
    print(
        f"hf_encoders {hf_encoders.__version__} from {hf_encoders.__file__}; transformers {transformers.__version__}; torch {torch.__version__}"
    )
    torch.manual_seed(0)
    batch = sample_batch()
    tokenizer = tiny_tokenizer()
    for name, model in build_models().items():
        perturb(model)
        model.eval()
        folder = HERE / name
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        expected = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
        for auto_class, forward_kwargs, fields in CASES[name]:
            reloaded = getattr(transformers, auto_class).from_pretrained(folder).eval()
            output = run(reloaded, batch, forward_kwargs)
            if type(reloaded) is type(model):
                # The saved model and its reload agree (same forward, so exactly).
                reference = run(model, batch, forward_kwargs)
                for field in fields:
                    torch.testing.assert_close(output[field], reference[field], rtol=0, atol=0)
            for field in fields:
                expected[output_key(auto_class, forward_kwargs, field)] = output[field].contiguous()
        torch.save(expected, folder / "expected.pt")
        config = json.loads((folder / "config.json").read_text())
        print(f"{name}: {sorted(p.name for p in folder.iterdir())}; config keys {sorted(config)}")

    clm_phase = torch.load(HERE / "biphasic_clm_phase" / "expected.pt", weights_only=True)
    # The 0.1.0 default follows the saved config's "clm"; the fill-mask class is the "mlm" objective.
    torch.testing.assert_close(
        clm_phase["AutoModelForPreTraining.logits"], clm_phase["AutoModelForPreTraining(objective=clm).logits"]
    )
    torch.testing.assert_close(
        clm_phase["AutoModelForMaskedLM.logits"], clm_phase["AutoModelForPreTraining(objective=mlm).logits"]
    )
    difference = (
        (
            clm_phase["AutoModelForPreTraining(objective=clm).logits"]
            - clm_phase["AutoModelForPreTraining(objective=mlm).logits"]
        )
        .abs()
        .max()
    )
    assert difference > 1e-3, f"CLM and MLM outputs should differ clearly, max difference {difference}"


if __name__ == "__main__":
    main()
