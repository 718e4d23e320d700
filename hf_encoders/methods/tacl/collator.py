"""TaCL's masking, as a `DataCollatorForLanguageModeling`."""

from dataclasses import dataclass

import torch

from ...data.reproducible_masking import MethodMaskingCollator


@dataclass
class DataCollatorForTacl(MethodMaskingCollator):
    """BERT's masking (15% of the real tokens; of those 80% [MASK], 10% random, 10% unchanged) over sentence
    pairs, with their `token_type_ids` padded and `next_sentence_label` passed through as a tensor.

    Every selected position, whatever was done to its input, gets a label and so becomes a TaCL anchor: the
    model rebuilds the clean text for the teacher from the labels. Special tokens and padding are never
    selected. Works on the output of `sentence_pairs.build_sentence_pairs`, or on plain
    examples without `next_sentence_label` (for students trained without NSP).
    """

    method_title = "TaCL"
    missing_mask_token_fix = (
        "use the tokenizer of the encoder TaCL continues (the same checkpoint as --model_name_or_path)."
    )
    mlm_probability: float = 0.15
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1

    def torch_call(self, examples):
        # The tokenizer's padding would try to pad a scalar label, so it travels around the parent.
        if "next_sentence_label" not in examples[0]:
            return super().torch_call(examples)
        next_sentence_labels = torch.tensor([example["next_sentence_label"] for example in examples], dtype=torch.long)
        batch = super().torch_call(
            [{k: v for k, v in example.items() if k != "next_sentence_label"} for example in examples]
        )
        batch["next_sentence_label"] = next_sentence_labels
        return batch
