"""MAE-LM pre-training from scratch with a plain Trainer, offline, in a few CPU minutes.

    python examples/pretrain_mae_lm.py --output_dir out/mae_lm --max_steps 500

The corpus is English prose shipped with Python; the tokenizer is trained on it. The checkpoint carries its own
code, so the stock scripts fine-tune the encoder with one extra flag (the decoder and LM head are dropped):

    python run_glue.py --model_name_or_path out/mae_lm --trust_remote_code --task_name mrpc --do_train --do_eval --output_dir out/mrpc
"""

import argparse

from transformers import Trainer, TrainingArguments

from hf_encoders import DataCollatorForMaeLm, MaeLmConfig, MaeLmForMaskedLM
from hf_encoders.data import (
    embedded_documents,
    load_documents,
    pack_bert_style,
    tokenize_documents,
    train_wordpiece_tokenizer,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output_dir", default="out/mae_lm")
    parser.add_argument("--max_steps", type=int, default=200)
    parser.add_argument("--block_size", type=int, default=128)
    settings = parser.parse_args()

    tokenizer = train_wordpiece_tokenizer(embedded_documents(), vocab_size=8000)
    blocks = pack_bert_style(
        tokenize_documents(load_documents(), tokenizer),
        settings.block_size,
        cls_id=tokenizer.cls_token_id,
        sep_id=tokenizer.sep_token_id,
        separator_id=tokenizer.sep_token_id,
    )
    # A small encoder with the paper's shape ratios: decoder 1/3 of the encoder's depth, 32 relative buckets.
    config = MaeLmConfig(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        mask_token_id=tokenizer.mask_token_id,
        hidden_size=256,
        num_hidden_layers=6,
        num_attention_heads=4,
        intermediate_size=1024,
        decoder_num_hidden_layers=2,
    )
    trainer = Trainer(
        model=MaeLmForMaskedLM(config),
        # The paper's optimisation (Table 3): Adam (0.9, 0.98), eps 1e-6, weight decay 0.01, clip 2.0, warm-up.
        args=TrainingArguments(
            output_dir=settings.output_dir,
            max_steps=settings.max_steps,
            per_device_train_batch_size=16,
            learning_rate=5e-4,
            warmup_steps=0.08,
            adam_beta2=0.98,
            adam_epsilon=1e-6,
            weight_decay=0.01,
            max_grad_norm=2.0,
            logging_steps=10,
            save_steps=max(settings.max_steps // 2, 1),
            report_to="none",
        ),
        train_dataset=blocks,
        data_collator=DataCollatorForMaeLm(tokenizer, pad_to_multiple_of=8),  # 15%, every selected token -> [MASK]
        processing_class=tokenizer,
    )
    trainer.train()
    trainer.save_model()
    print(f"fine-tune {settings.output_dir} with run_glue.py --trust_remote_code")


if __name__ == "__main__":
    main()
