"""`hf-encoders pretrain --method mae_lm`: MAE-LM from scratch, continued from an MAE-LM checkpoint, or started from a
pretrained BERT-family encoder (`--model_name_or_path`, dispatched on its model_type)."""

from ...models._shared.checkpoint_io import checkpoint_model_type
from ...models.mae_lm import MaeLmConfig, MaeLmForMaskedLM
from ...training.growth import grow_into
from ...training.model_sizes import parse_config_overrides, sized_config_kwargs
from ...training.recipe import BertBlocksRecipe, Recipe
from .conversion import from_encoder
from .encoder_hold import HOLD_SUMMARY, EncoderHoldCallback, check_hold_steps, check_resumed_hold

# base is the paper's (Table 3); the decoder is 1/3 of the encoder's depth as in the paper's base setting.
# tiny and small add two decoder options the paper's decoder lacks: from scratch, a small decoder settles on the token
# frequencies (the [MASK] embedding gives them, no encoder needed) before it reads the encoder, which then collapses;
# a locality bias and larger value/output projections let a masked position read its neighbours from the first step
# (small's spread is tiny's scaled by 1/sqrt(width)).
SIZES = {
    "tiny": dict(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=256,
        decoder_num_hidden_layers=1,
        relative_attention_num_buckets=32,
        decoder_locality_slope=1.0,
        decoder_value_init_std=0.2,
    ),
    "small": dict(
        hidden_size=256,
        num_hidden_layers=6,
        num_attention_heads=4,
        intermediate_size=1024,
        decoder_num_hidden_layers=2,
        decoder_locality_slope=1.0,
        decoder_value_init_std=0.1,
    ),
    "base": dict(
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        decoder_num_hidden_layers=4,
    ),
}


class MaeLmRecipe(BertBlocksRecipe):
    config_class = MaeLmConfig
    # Its relative bias needs no change for longer blocks (every distance past relative_attention_max_distance shares
    # the last bucket of its direction); its learned absolute positions limit a continued checkpoint's blocks.
    options = (
        *Recipe.options,
        "pack_documents",
        "mask_in_encoder_fraction",
        "hold_encoder_steps",
        "init_from_smaller",
    )

    def check_arguments(self, args) -> None:
        delta = args.mask_in_encoder_fraction
        if not 0.0 <= delta <= 1.0:
            raise ValueError(
                f"--mask_in_encoder_fraction (δ) must lie in [0, 1], got {delta}: 0 is MAE-LM, 1 is standard MLM with "
                "a decoder."
            )
        overridden = (item.partition("=")[0].strip() for item in (args.config_overrides or "").split(","))
        if "mask_in_encoder_fraction" in overridden:
            raise ValueError(
                "--config_overrides mask_in_encoder_fraction=...: δ is no longer a model config field but the "
                "collator's masking decision; pass --mask_in_encoder_fraction instead."
            )
        if args.hold_encoder_steps is not None:
            check_hold_steps(args.hold_encoder_steps)
            if not args.model_name_or_path:
                raise ValueError(
                    "--hold_encoder_steps holds a pretrained encoder still while the new decoder learns to read it; "
                    "this run starts from scratch, so there is nothing to hold: give --model_name_or_path, or drop "
                    "the option."
                )
        super().check_arguments(args)

    def check_resume(self, args, training_args, checkpoint: str) -> None:
        restores = training_args.restore_callback_states_from_checkpoint
        check_resumed_hold(args.hold_encoder_steps, checkpoint, restores_callback_states=restores)

    def callbacks(self, args):
        return [] if args.hold_encoder_steps is None else [EncoderHoldCallback(args.hold_encoder_steps)]

    def build_collator(self, args, tokenizer):
        """δ, which [MASK]s stay in the encoder input, is decided in the collator, per masking unit."""
        collator = super().build_collator(args, tokenizer)
        collator.mask_in_encoder_fraction = args.mask_in_encoder_fraction
        return collator

    def summary_lines(self, args) -> list[str]:
        lines = [f"- [MASK]s kept in the encoder input (δ): {args.mask_in_encoder_fraction:.0%}"]
        if args.hold_encoder_steps is not None:
            lines.append(HOLD_SUMMARY.format(steps=args.hold_encoder_steps))
        return [*super().summary_lines(args), *lines]

    def build_model(self, args, tokenizer):
        if args.model_name_or_path:
            return self.continued_model(args, tokenizer)
        settings = dict(
            vocab_size=len(tokenizer),
            pad_token_id=tokenizer.pad_token_id,
            mask_token_id=tokenizer.mask_token_id,
            max_position_embeddings=max(512, args.block_size),
        )
        config = MaeLmConfig(
            **{**settings, **sized_config_kwargs(SIZES, args.model_size, args.config_overrides, self.config_class)}
        )
        model = MaeLmForMaskedLM(config)
        return grow_into(model, args.init_from_smaller) if args.init_from_smaller else model

    def overrides_apply_to(self, start: str) -> bool:
        # A converted encoder gets a new decoder, which they shape; an MAE-LM checkpoint is continued as it is.
        return checkpoint_model_type(start, {}) != MaeLmConfig.model_type

    @staticmethod
    def continued_model(args, tokenizer) -> MaeLmForMaskedLM:
        """An MAE-LM checkpoint as it is; any other encoder converted (conversion.py), with a new decoder whose shape
        (and relative-bias buckets) `--config_overrides` may set."""
        path = args.model_name_or_path
        if checkpoint_model_type(path, {}) == MaeLmConfig.model_type:
            return MaeLmForMaskedLM.from_pretrained(path)
        overrides = parse_config_overrides(args.config_overrides, MaeLmConfig)
        model = from_encoder(MaeLmForMaskedLM, path, mask_token_id=tokenizer.mask_token_id, **overrides)
        if len(tokenizer) > model.config.vocab_size:
            raise ValueError(
                f"The tokenizer has {len(tokenizer)} tokens but the encoder {path} only {model.config.vocab_size} "
                f"embeddings; use the encoder's own tokenizer (--tokenizer_name {path})."
            )
        return model
