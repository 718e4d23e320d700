"""`hf-encoders export` and `hf-encoders convert` end to end: checkpoints that need no remote code afterwards."""

import json

import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoModelForPreTraining

from hf_encoders import BiphasicEncoderForMaskedLM, BiphasicEncoderForPreTraining, MaeLmForMaskedLM, TaclForPreTraining
from hf_encoders_cli import main
from tests.helpers import assert_close_at_real_tokens
from tests.tiny_models import (
    sample_batch,
    tiny_biphasic_config,
    tiny_llama,
    tiny_mae_lm_config,
    tiny_tacl_config,
    tiny_tokenizer,
)


def python_files(folder):
    return sorted(path.name for path in folder.glob("*.py"))


def test_export_biphasic_writes_native_eurobert_with_equal_outputs(tmp_path):
    model = BiphasicEncoderForMaskedLM(tiny_biphasic_config()).eval()
    model.save_pretrained(tmp_path / "biphasic")
    tiny_tokenizer().save_pretrained(tmp_path / "biphasic")
    assert main(["export", str(tmp_path / "biphasic"), str(tmp_path / "eurobert")]) == 0
    assert json.loads((tmp_path / "eurobert" / "config.json").read_text())["model_type"] == "eurobert"
    assert python_files(tmp_path / "eurobert") == [], "a native export carries no remote code"
    exported = AutoModelForMaskedLM.from_pretrained(tmp_path / "eurobert").eval()
    assert type(exported).__name__ == "EuroBertForMaskedLM"
    batch = sample_batch()
    with torch.no_grad():
        assert_close_at_real_tokens(exported(**batch).logits, model(**batch).logits, batch["attention_mask"])


def test_export_tacl_writes_the_student_as_plain_bert(tmp_path):
    model = TaclForPreTraining(tiny_tacl_config())
    model.save_pretrained(tmp_path / "tacl")
    tiny_tokenizer().save_pretrained(tmp_path / "tacl")
    assert main(["export", str(tmp_path / "tacl"), str(tmp_path / "student")]) == 0
    assert json.loads((tmp_path / "student" / "config.json").read_text())["model_type"] == "bert"
    assert python_files(tmp_path / "student") == []
    student = AutoModelForPreTraining.from_pretrained(tmp_path / "student")
    assert type(student).__name__ == "BertForPreTraining"
    for name, tensor in model.student.state_dict().items():
        assert torch.equal(student.state_dict()[name], tensor), name


def test_export_refuses_a_method_that_needs_no_export(tmp_path):
    MaeLmForMaskedLM(tiny_mae_lm_config()).save_pretrained(tmp_path / "mae")
    with pytest.raises(ValueError, match="trust_remote_code"):
        main(["export", str(tmp_path / "mae"), str(tmp_path / "out")])
    with pytest.raises(ValueError, match=r"no config.json"):
        main(["export", str(tmp_path / "nothing"), str(tmp_path / "out")])


def test_convert_turns_a_causal_lm_folder_into_a_biphasic_checkpoint(tmp_path):
    llama = tiny_llama()
    llama.save_pretrained(tmp_path / "llama")
    tiny_tokenizer().save_pretrained(tmp_path / "llama")
    assert main(["convert", "--from_causal_lm", str(tmp_path / "llama"), str(tmp_path / "converted")]) == 0
    converted = AutoModelForPreTraining.from_pretrained(tmp_path / "converted").eval()
    assert isinstance(converted, BiphasicEncoderForPreTraining)
    ids = sample_batch()["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(converted(input_ids=ids, objective="clm").logits, llama(input_ids=ids).logits)
