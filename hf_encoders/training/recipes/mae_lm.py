"""`hf-encoders pretrain --method mae_lm`: MAE-LM from scratch (or continued from an MAE-LM checkpoint)."""

from ...data.packing import pack_bert_style, tokenize_documents
from ...models.mae_lm import MaeLmConfig, MaeLmForMaskedLM
from ..model_sizes import sized_config_kwargs
from .base import Recipe

# base is the paper's (Table 3); the decoder is 1/3 of the encoder's depth as in the paper's base setting.
SIZES = {
    "tiny": dict(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=256,
        decoder_num_hidden_layers=1,
        relative_attention_num_buckets=32,
    ),
    "small": dict(
        hidden_size=256, num_hidden_layers=6, num_attention_heads=4, intermediate_size=1024, decoder_num_hidden_layers=2
    ),
    "base": dict(
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        decoder_num_hidden_layers=4,
    ),
}


class MaeLmRecipe(Recipe):
    def build_dataset(self, args, tokenizer, documents):
        tokenized = tokenize_documents(documents, tokenizer, num_proc=args.preprocessing_num_workers)
        return pack_bert_style(
            tokenized,
            args.block_size,
            cls_id=tokenizer.cls_token_id,
            sep_id=tokenizer.sep_token_id,
            separator_id=tokenizer.sep_token_id,
            num_proc=args.preprocessing_num_workers,
            pack_documents=args.pack_documents,
        )

    def build_model(self, args, tokenizer):
        if args.model_name_or_path:
            return MaeLmForMaskedLM.from_pretrained(args.model_name_or_path)
        settings = dict(
            vocab_size=len(tokenizer),
            pad_token_id=tokenizer.pad_token_id,
            mask_token_id=tokenizer.mask_token_id,
            max_position_embeddings=max(512, args.block_size),
        )
        config = MaeLmConfig(**{**settings, **sized_config_kwargs(SIZES, args.model_size, args.config_overrides)})
        return MaeLmForMaskedLM(config)
