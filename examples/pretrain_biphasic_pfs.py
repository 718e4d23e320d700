"""Biphasic pre-training from scratch (PFS): 25% CLM then 75% MLM on one network, one WSD schedule.

    python examples/pretrain_biphasic_pfs.py --output_dir out/biphasic-pfs --max_steps 200

Runs offline on the English prose embedded in Python's documentation with a WordPiece tokenizer trained on the
spot; pass --model_size base for the paper's 210M shape. The paper: batch ~2.4M tokens, 42k steps, lr 5e-4,
2k warmup, 2k linear decay, AdamW (0.9, 0.95), weight decay 0.1, 40% masking.
"""

import argparse

from datasets import Dataset
from transformers import TrainingArguments

from hf_encoders import BiphasicConfig, BiphasicEncoderForPreTraining, DataCollatorForBiphasic, PhaseScheduleCallback
from hf_encoders.data import embedded_documents, pack_llama_style, tokenize_documents, train_wordpiece_tokenizer
from hf_encoders.methods.biphasic.conversion import prepare_tokenizer
from hf_encoders.methods.biphasic.recipe import SIZES
from hf_encoders.training.trainer import PretrainingTrainer

parser = argparse.ArgumentParser()
parser.add_argument("--output_dir", default="out/biphasic-pfs")
parser.add_argument("--max_steps", type=int, default=200)
parser.add_argument("--phases", default="clm:0.25,mlm:0.75")
parser.add_argument("--model_size", default="tiny", choices=["tiny", "210m", "610m", "1b"])
args = parser.parse_args()

documents = Dataset.from_dict({"text": embedded_documents()})
tokenizer = prepare_tokenizer(train_wordpiece_tokenizer(documents["text"], vocab_size=8000))  # [SEP] ends documents
blocks = pack_llama_style(tokenize_documents(documents, tokenizer), block_size=128, eos_id=tokenizer.eos_token_id)

ids = dict(
    vocab_size=len(tokenizer),
    pad_token_id=tokenizer.pad_token_id,
    bos_token_id=None,
    eos_token_id=tokenizer.eos_token_id,
    mask_token_id=tokenizer.mask_token_id,
)
if args.model_size == "tiny":
    config = BiphasicConfig(**SIZES["tiny"], **ids)  # what `hf-encoders pretrain --model_size tiny` builds
else:
    config = BiphasicConfig.from_preset(args.model_size, **ids)
model = BiphasicEncoderForPreTraining(config)

training_args = TrainingArguments(
    output_dir=args.output_dir,
    max_steps=args.max_steps,
    per_device_train_batch_size=16,
    learning_rate=5e-4,
    adam_beta2=0.95,
    weight_decay=0.1,
    max_grad_norm=1.0,
    # ONE warmup-stable-decay schedule over both phases: MLM continues from a CLM model that has not decayed.
    lr_scheduler_type="warmup_stable_decay",
    lr_scheduler_kwargs={"num_decay_steps": max(1, args.max_steps // 20), "decay_type": "linear"},
    warmup_steps=max(1, args.max_steps // 20),
    logging_steps=10,
    report_to=[],
)
trainer = PretrainingTrainer(  # Trainer that logs clm_loss or mlm_loss next to loss, by phase
    model=model,
    args=training_args,
    train_dataset=blocks,
    data_collator=DataCollatorForBiphasic(tokenizer),  # both views per batch; the callback picks one per step
    processing_class=tokenizer,
    callbacks=[PhaseScheduleCallback.from_string(args.phases)],
)
trainer.train()
trainer.save_model()  # the phase is run state, never saved: the checkpoint is the encoder, whatever phase ended
