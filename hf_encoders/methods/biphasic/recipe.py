"""`hf-encoders pretrain --method biphasic`: CLM -> MLM on one Llama-style network.

* PFS (from scratch): a `--model_size` preset, `--phases clm:0.25,mlm:0.75` (the paper's best split).
* CPT: `--from_causal_lm PATH` converts a Llama-family causal LM (folder, Hub name or .gguf file) and continues
  with MLM alone (the default `--phases` when training starts from a checkpoint); `--model_name_or_path` continues
  a biphasic checkpoint.

The paper runs ONE warmup-stable-decay schedule over the whole run with linear decay:
`--lr_scheduler_type warmup_stable_decay --lr_scheduler_kwargs '{"num_decay_steps": N, "decay_type": "linear"}'`
with AdamW (0.9, 0.95), weight decay 0.1, clipping 1.0.
"""

from pathlib import Path

from ...data.packing import pack_llama_style
from ...models.biphasic import BiphasicConfig, BiphasicEncoderForPreTraining
from ...models.biphasic.configuration_biphasic import PRESETS
from ...training.growth import grow_into
from ...training.model_sizes import sized_config_kwargs
from ...training.recipe import Recipe
from .conversion import fit_model_to_tokenizer, from_causal_lm, load_causal_lm_tokenizer, prepare_tokenizer
from .phases import PhaseScheduleCallback

# base is the paper's 210M model; tiny and small keep grouped-query attention so demos exercise it.
SIZES = {
    "tiny": dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=256
    ),
    "small": dict(
        hidden_size=256, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2, intermediate_size=1024
    ),
    "base": PRESETS["210m"],
}


class BiphasicRecipe(Recipe):
    config_class = BiphasicConfig
    rotary_positions = True
    packing_style = "Llama-style blocks (documents started by BOS and ended by EOS)"
    options = (*Recipe.options, "from_causal_lm", "pack_documents", "phases", "init_from_smaller")
    # Perplexity is the masked-LM one: a CLM-phase evaluation (eval_loss = eval_clm_loss, a causal LM's) logs none.
    perplexity_loss = "eval_mlm_loss"

    def check_arguments(self, args) -> None:
        if args.from_causal_lm and args.model_name_or_path:
            raise ValueError(
                "Pass one starting point: --from_causal_lm (a causal LM to convert) or --model_name_or_path "
                "(a biphasic checkpoint to continue), not both."
            )
        super().check_arguments(args)

    def unread_options(self, args) -> dict[str, str]:
        unread = super().unread_options(args)
        if args.from_causal_lm:
            unread["tokenizer_name"] = (
                f"--tokenizer_name is not read with --from_causal_lm: the encoder keeps the vocabulary of "
                f"{args.from_causal_lm}, whose own tokenizer it is given. Drop --tokenizer_name."
            )
        return unread

    def build_tokenizer(self, args, documents):
        if args.from_causal_lm:
            return load_causal_lm_tokenizer(args.from_causal_lm)
        return prepare_tokenizer(super().build_tokenizer(args, documents))

    def build_dataset(self, args, tokenizer, documents):
        return pack_llama_style(
            self.tokenized(args, tokenizer, documents),
            args.block_size,
            eos_id=tokenizer.eos_token_id,
            bos_id=tokenizer.bos_token_id,
            num_proc=args.preprocessing_num_workers,
            pack_documents=args.pack_documents,
        )

    def build_model(self, args, tokenizer):
        if args.from_causal_lm:
            model = fit_model_to_tokenizer(
                from_causal_lm(BiphasicEncoderForPreTraining, args.from_causal_lm), tokenizer
            )
        elif args.model_name_or_path:
            model = BiphasicEncoderForPreTraining.from_pretrained(args.model_name_or_path)
        else:
            settings = dict(
                vocab_size=len(tokenizer),
                pad_token_id=tokenizer.pad_token_id,
                bos_token_id=tokenizer.bos_token_id,
                eos_token_id=tokenizer.eos_token_id,
                mask_token_id=tokenizer.mask_token_id,
                max_position_embeddings=max(BiphasicConfig.max_position_embeddings, args.block_size),
            )
            config = BiphasicConfig(
                **{**settings, **sized_config_kwargs(SIZES, args.model_size, args.config_overrides, self.config_class)}
            )
            model = BiphasicEncoderForPreTraining(config)
            if args.init_from_smaller:
                model = grow_into(model, args.init_from_smaller)
        if args.block_size > model.config.max_position_embeddings:
            raise ValueError(
                f"--block_size {args.block_size} exceeds the model's max_position_embeddings "
                f"({model.config.max_position_embeddings}); pass a smaller --block_size."
            )
        return model

    def phases(self, args) -> str:
        # A model grown from a smaller checkpoint continues its training, as one continued from a checkpoint does.
        started = args.starting_checkpoint or args.init_from_smaller
        return args.phases or ("mlm:1.0" if started else "clm:0.25,mlm:0.75")

    def callbacks(self, args):
        return [PhaseScheduleCallback.from_string(self.phases(args))]

    def card_variables(self, args) -> dict[str, str]:
        """What the card says about how this run trained: both phases (PFS), or MLM alone from a start (CPT)."""
        objectives = [phase.split(":")[0] for phase in self.phases(args).split(",")]
        if "clm" not in objectives:
            cpt = (
                " (the paper's continued pre-training, CPT: Gisserot-Boukhlef et al., 2025, found MLM continued from a "
                "causal LM a better encoder than MLM continued from an MLM model)"
            )
            return dict(
                how_trained=f"{self.start_in_words(args)} with masked language modelling alone, on a bidirectional "
                f"mask{cpt if args.from_causal_lm else ''}.",
                loss_terms="`mlm_loss` in the training logs is the masked-LM loss; this run had no CLM phase.",
            )
        return dict(
            how_trained="trained first with causal language modelling and then with masked language modelling on the "
            "same weights; only the attention mask changes between the phases. Following Gisserot-Boukhlef et al. "
            "(2025), the CLM phase makes training data-efficient and stable, and the MLM phase turns the network "
            "into a bidirectional encoder.",
            loss_terms="`clm_loss` and `mlm_loss` in the training logs are the losses of the two phases.",
        )

    @staticmethod
    def start_in_words(args) -> str:
        """Where an MLM-only run started; a local path by its file or folder name (the card goes to the Hub)."""
        source = args.starting_checkpoint
        if args.init_from_smaller:
            grown = args.init_from_smaller
            return (
                f"grown from the smaller checkpoint {Path(grown).name if Path(grown).exists() else grown} and trained"
            )
        if source is None:
            return "trained from scratch"
        kind = "causal language model" if args.from_causal_lm else "checkpoint"
        return f"continued from the {kind} {Path(source).name if Path(source).exists() else source}"

    def summary_lines(self, args):
        return [*super().summary_lines(args), f"- phases (objective:fraction of steps): {self.phases(args)}"]
