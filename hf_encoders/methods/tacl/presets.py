"""TaCL's paper preset: *TaCL: Improving BERT Pre-training with Token-aware Contrastive Learning* (Su et al., NAACL
2022 Findings), §3: BERT-base continued on Wikipedia. TaCL continues a pretrained encoder, so it has no small-run
settings."""

from ...training.presets import Preset, Sourced

PAPER = "Su et al., 2022, TaCL, §3"

PRESETS = {
    "tacl-bert-base": Preset(
        name="tacl-bert-base",
        method="tacl",
        paper=PAPER,
        summary="BERT-base continued with TaCL for 150K steps of 256 x 256 tokens",
        # bert-base-uncased's configuration is BertConfig's defaults: the student trains, the teacher runs forward.
        model="transformers:BertForPreTraining",
        frozen="transformers:BertModel",
        batch_size=Sourced(256, "§3: the batch size is set as 256"),
        options={
            "model_name_or_path": Sourced("bert-base-uncased", "§3: BERT-base for the English benchmarks"),
            "max_steps": Sourced(150_000, "§3: continually pre-train ... for 150k steps"),
            "block_size": Sourced(256, "§3: truncated with a maximum length of 256"),
            "tacl_temperature": Sourced(0.01, "§3: the temperature τ in Eq. (1) is set as 0.01"),
            "learning_rate": Sourced(1e-4, "§3: an initial learning rate of 1e-4"),
            "warmup_steps": Sourced(0.1, "§3: with warm-up ratio of 10%"),
            "lr_scheduler_type": Sourced("linear", "§3: same as Devlin et al. (2019), BERT's linear decay"),
            "weight_decay": Sourced(0.01, "§3: Adam with weight decay, same as Devlin et al. (2019): BERT's 0.01"),
            "per_device_train_batch_size": Sourced(32, "not in the paper: a micro-batch that fits an 80 GB GPU"),
        },
    )
}
