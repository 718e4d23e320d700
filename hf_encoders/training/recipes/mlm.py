"""`hf-encoders pretrain --method mlm`: the BERT masked-LM baseline the other methods are measured against:
stock `BertForMaskedLM` and `DataCollatorForLanguageModeling`'s 80/10/10 (with reproducible masks for resume)."""

from transformers import BertConfig, BertForMaskedLM

from ...data.reproducible_masking import ReproducibleDataCollatorForLanguageModeling
from ..model_sizes import sized_config_kwargs
from .mae_lm import MaeLmRecipe

# The same encoder shapes as MAE-LM's presets, so a comparison changes the method and nothing else.
SIZES = {
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256),
    "small": dict(hidden_size=256, num_hidden_layers=6, num_attention_heads=4, intermediate_size=1024),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
}


class MlmRecipe(MaeLmRecipe):
    """Shares MAE-LM's data (BERT-style packed blocks); only model and collator differ."""

    name = "mlm"
    card_template = "mlm"

    def build_model(self, args, tokenizer):
        if args.init:
            return BertForMaskedLM.from_pretrained(args.init)
        config = BertConfig(
            vocab_size=len(tokenizer),
            pad_token_id=tokenizer.pad_token_id,
            max_position_embeddings=max(512, args.block_size),
            **sized_config_kwargs(SIZES, args.model_size, args.config_overrides),
        )
        return BertForMaskedLM(config)

    def build_collator(self, args, tokenizer):
        return ReproducibleDataCollatorForLanguageModeling(
            tokenizer, mlm_probability=args.mlm_probability or 0.15, pad_to_multiple_of=8
        )
