"""`hf-encoders pretrain --method mlm`: the BERT masked-LM baseline the other methods are measured against:
stock `BertForMaskedLM` and `DataCollatorForLanguageModeling`'s 80/10/10 (with reproducible masks for resume)."""

from transformers import BertConfig, BertForMaskedLM

from ...models._shared.checkpoint_io import checkpoint_model_type
from ...training.model_sizes import sized_config_kwargs
from ...training.recipe import BertBlocksRecipe, Recipe
from ..mae_lm import recipe as mae_lm

# MAE-LM's encoder shapes (not its decoder), so a comparison changes the method and nothing else.
ENCODER_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
SIZES = {size: {name: shape[name] for name in ENCODER_FIELDS} for size, shape in mae_lm.SIZES.items()}


class MlmRecipe(BertBlocksRecipe):
    """MAE-LM's data (BERT-style packed blocks) and encoder shapes; only the model differs."""

    config_class = BertConfig
    options = Recipe.options  # not --pack_documents: its model cannot keep packed documents apart

    no_packed_documents = (
        "its model is transformers' BertForMaskedLM, whose sdpa and eager attention take no packed-sequence mask, "
        "so packed documents would attend to each other."
    )

    def overrides_apply_to(self, start: str) -> bool:
        return False  # a BERT checkpoint is continued as it is

    def build_model(self, args, tokenizer):
        if args.model_name_or_path:
            found = checkpoint_model_type(args.model_name_or_path, {})
            if found != BertConfig.model_type:  # else from_pretrained builds a fresh BERT and reports every weight
                raise ValueError(
                    f"{args.model_name_or_path} holds a {found!r} model, not a 'bert' one: --method mlm continues a "
                    "BERT checkpoint. Pass one, or the --method that made this checkpoint."
                )
            return BertForMaskedLM.from_pretrained(args.model_name_or_path)
        settings = dict(
            vocab_size=len(tokenizer),
            pad_token_id=tokenizer.pad_token_id,
            max_position_embeddings=max(512, args.block_size),
        )
        config = BertConfig(
            **{**settings, **sized_config_kwargs(SIZES, args.model_size, args.config_overrides, self.config_class)}
        )
        return BertForMaskedLM(config)
