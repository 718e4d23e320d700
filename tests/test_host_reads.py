"""A training step that does not log reads nothing from the device: the model's forward and backward on its collator's
index tensors, and PretrainingTrainer's measures, which stay on the device until a log reads them."""

import torch
from transformers import TrainerCallback, TrainingArguments

from hf_encoders import DataCollatorForMaeLm, MaeLmForMaskedLM
from hf_encoders.training.trainer import PretrainingTrainer
from tests.helpers import DeviceReads
from tests.tiny_models import tiny_mae_lm_config, tiny_tokenizer


class ReadsPerStep(TrainerCallback):
    """The reads counted from each step's start to the next one's (or the end of training), by step."""

    def __init__(self, counter: DeviceReads):
        self.counter, self.mark, self.step, self.by_step = counter, 0, None, {}

    def close_window(self):
        if self.step is not None:
            self.by_step[self.step] = self.counter.reads[self.mark :]
        self.mark = len(self.counter.reads)

    def on_step_begin(self, args, state, control, **kwargs):
        self.close_window()
        self.step = state.global_step + 1

    def on_train_end(self, args, state, control, **kwargs):
        self.close_window()


class Batches(torch.utils.data.Dataset):
    """Batches collated beforehand, so that the loader's collation (host work on host tensors) is not counted."""

    def __init__(self, batches):
        self.batches = batches

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, index):
        return self.batches[index]


def test_only_the_logging_steps_of_a_run_read_from_the_device(tmp_path):
    tokenizer = tiny_tokenizer(cls_sep_template=True)
    generator = torch.Generator().manual_seed(0)
    collator = DataCollatorForMaeLm(tokenizer, seed=0)
    batches = [
        collator([{"input_ids": row} for row in torch.randint(5, 64, (4, 30), generator=generator).tolist()])
        for _ in range(8)  # more than the run's steps: the sampler draws its order (on the host) at the start only
    ]
    torch.manual_seed(0)
    model = MaeLmForMaskedLM(tiny_mae_lm_config())
    args = TrainingArguments(
        str(tmp_path),
        max_steps=6,
        logging_steps=3,
        per_device_train_batch_size=1,
        learning_rate=1e-3,
        # torch's AdamW on a CPU keeps its step count in a CPU tensor and reads it each step (fused AdamW on a GPU,
        # pretrain's default there, keeps it on the device); SGD has no such count.
        optim="sgd",
        logging_nan_inf_filter=False,  # pretrain's default: the filter reads every step's loss
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
    )
    counter = DeviceReads()
    reads = ReadsPerStep(counter)
    trainer = PretrainingTrainer(
        model=model,
        args=args,
        train_dataset=Batches(batches),
        data_collator=lambda features: features[0],
        callbacks=[reads],
    )
    with counter:
        trainer.train()
    assert sorted(reads.by_step) == [1, 2, 3, 4, 5, 6]
    # Step 1 is left out: MAE-LM looks at the first batch's padding once (warn_if_padding_differs).
    assert {step: reads.by_step[step] for step in (2, 4, 5)} == {2: [], 4: [], 5: []}
    assert reads.by_step[3] and reads.by_step[6], "the logging steps read the loss and the measures"
    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert [entry["step"] for entry in logged] == [3, 6] and all("tokens_per_second" in entry for entry in logged)
