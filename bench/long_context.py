"""Length scaling: one training step of every method and of the long-context anchors at 512 ... 8,192 tokens.

    python bench/long_context.py                                  # CPU: 2 layers x 256, 8,192 tokens a step
    python bench/long_context.py --layers 12 --hidden 768 --tokens 65536 --dtype bfloat16   # GPU

The model shape stays the same and the batch shrinks as the length grows (tokens per step fixed), so the columns are
per token: microseconds of one step (forward, backward, AdamW) and KiB autograd saves for backward (bench/run.py's
saved-tensor hooks; each storage once, weights excluded). Targets (issue 28), for every method: memory per token at
8,192 within 1.5x of its own at 512, and time per token at 8,192 over its own at 512 no worse than its anchor's
(BERT for TaCL and MAE-LM, EuroBERT for biphasic). ModernBERT (alternating global and 128-token local attention) is
the long-context reference. Attention dropout is 0 for every model (as ModernBERT and EuroBERT train): on CPU, sdpa
with dropout falls back to the math kernel, which keeps every L x L probability matrix for backward.

On CUDA, "MAE-LM flex_attention" is MAE-LM on the kernel `hf-encoders pretrain` takes there (the relative bias as a
score_mod, compiled); "MAE-LM" stays on sdpa (a dense bias up to 1,024 tokens, query blocks beyond). flex_attention
has no backward on CPU, so the row is left out there.
"""

import argparse
import statistics
import sys

import torch
from run import MASK_ID, PAD_ID, TimedStep, built_on, masked_batch, sentence_pair_batch
from transformers import (
    BertConfig,
    BertForMaskedLM,
    EuroBertConfig,
    EuroBertForMaskedLM,
    ModernBertConfig,
    ModernBertForMaskedLM,
)

from hf_encoders import (
    BiphasicConfig,
    BiphasicEncoderForPreTraining,
    MaeLmConfig,
    MaeLmForMaskedLM,
    TaclConfig,
    TaclForPreTraining,
)

FLEX_MAE_LM = "MAE-LM flex_attention"
ANCHOR_OF = {
    "TaCL": "BertForMaskedLM",
    "MAE-LM": "BertForMaskedLM",
    FLEX_MAE_LM: "BertForMaskedLM",
    "biphasic MLM": "EuroBertForMaskedLM",
}


def models(settings) -> dict[str, tuple]:
    """name -> (model builder, batch builder(batch settings)); every model with room for the longest length."""
    longest = max(settings.lengths)
    shape = dict(
        hidden_size=settings.hidden,
        num_hidden_layers=settings.layers,
        num_attention_heads=settings.hidden // 64,
        intermediate_size=4 * settings.hidden,
    )
    bert = dict(
        vocab_size=settings.vocab,
        pad_token_id=PAD_ID,
        max_position_embeddings=longest,
        attention_probs_dropout_prob=0.0,
        **shape,
    )
    llama = dict(
        vocab_size=settings.vocab,
        pad_token_id=PAD_ID,
        bos_token_id=1,
        eos_token_id=2,
        mask_token_id=MASK_ID,
        num_key_value_heads=settings.hidden // 64,
        max_position_embeddings=longest,
        **shape,
    )
    mlm_batch = lambda batch_settings: masked_batch(batch_settings, settings.vocab, 0.15)  # noqa: E731
    mae_lm = dict(mask_token_id=MASK_ID, decoder_num_hidden_layers=max(1, settings.layers // 3), **bert)
    flex = {
        FLEX_MAE_LM: (lambda: MaeLmForMaskedLM(MaeLmConfig(**mae_lm, attn_implementation="flex_attention")), mlm_batch)
    }
    return {
        "BertForMaskedLM": (lambda: BertForMaskedLM(BertConfig(**bert)), mlm_batch),
        "EuroBertForMaskedLM": (lambda: EuroBertForMaskedLM(EuroBertConfig(**llama)), mlm_batch),
        "ModernBertForMaskedLM": (
            lambda: ModernBertForMaskedLM(
                ModernBertConfig(
                    vocab_size=settings.vocab,
                    pad_token_id=PAD_ID,
                    mask_token_id=MASK_ID,
                    bos_token_id=1,
                    cls_token_id=1,
                    eos_token_id=2,
                    sep_token_id=2,
                    max_position_embeddings=longest,
                    **shape,
                )
            ),
            mlm_batch,
        ),
        "TaCL": (
            lambda: TaclForPreTraining(TaclConfig(student_config=BertConfig(**bert).to_dict())),
            lambda batch_settings: sentence_pair_batch(batch_settings, settings.vocab),
        ),
        "MAE-LM": (lambda: MaeLmForMaskedLM(MaeLmConfig(**mae_lm)), mlm_batch),
        **(flex if settings.device == "cuda" or FLEX_MAE_LM in (settings.only or "") else {}),
        "biphasic MLM": (lambda: BiphasicEncoderForPreTraining(BiphasicConfig(**llama)), mlm_batch),
    }


def measure(chosen: dict, settings, length: int) -> dict[str, tuple[float, float]]:
    """name -> (microseconds, KiB saved for backward) per token of one step at `length`. The models' steps are timed
    in turn, repeat after repeat, so that a shared machine changing speed slows all of them alike."""
    batch_settings = argparse.Namespace(batch=max(1, settings.tokens // length), length=length)
    real_tokens = batch_settings.batch * length
    steps = {}
    for name, (build, batch) in chosen.items():
        torch.manual_seed(0)
        steps[name] = TimedStep(built_on(settings.device, build), batch(batch_settings), settings)
        steps[name]()  # warm-up: allocator, kernels, AdamW state
    times = {name: [] for name in steps}
    for _ in range(settings.repeats):
        for name, step in steps.items():
            times[name].append(step())
    cells = {}
    for name, step in steps.items():
        saved_mib, _ = step.saved_for_backward_mib()
        cells[name] = statistics.median(times[name]) / real_tokens * 1e6, saved_mib * 1024 / real_tokens
        print(f"  {length} {name}: {cells[name][0]:,.1f} us / {cells[name][1]:,.1f} KiB", file=sys.stderr, flush=True)
    return cells


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--tokens", type=int, default=8192, help="tokens per step, at every length")
    parser.add_argument("--lengths", default="512,1024,2048,4096,8192")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument(
        "--only", help=f"comma-separated model names (default: all), e.g. BertForMaskedLM,{FLEX_MAE_LM}"
    )
    parser.add_argument("--list", action="store_true", help="print the models and lengths this command would time")
    settings = parser.parse_args(argv)
    settings.lengths = [int(length) for length in settings.lengths.split(",")]
    chosen = models(settings)
    if settings.only:
        chosen = {name: chosen[name] for name in settings.only.split(",")}
    if settings.list:
        lengths = ", ".join(f"{length:,}" for length in settings.lengths)
        print("\n".join(f"    {name} at {lengths} tokens" for name in chosen))
        return
    first, last = settings.lengths[0], settings.lengths[-1]
    print(
        f"{settings.layers} layers x {settings.hidden}, {settings.tokens:,} tokens a step, vocabulary "
        f"{settings.vocab:,}, {settings.device}, {settings.dtype}, torch threads {torch.get_num_threads()}, median "
        f"of {settings.repeats}; per token: us of a step / KiB saved for backward"
    )
    print(
        "| model | "
        + " | ".join(f"{length:,}" for length in settings.lengths)
        + f" | time {last} / {first} | memory {last} / {first} | targets met |"
    )
    print("|---" * (len(settings.lengths) + 4) + "|")
    cells = {length: measure(chosen, settings, length) for length in settings.lengths}
    time_ratios = {name: cells[last][name][0] / cells[first][name][0] for name in chosen}
    for name in chosen:
        memory_ratio = cells[last][name][1] / cells[first][name][1]
        anchor = ANCHOR_OF.get(name)
        if anchor is None:
            verdict = "(anchor)"
        elif anchor in time_ratios:
            verdict = "yes" if memory_ratio <= 1.5 and time_ratios[name] <= time_ratios[anchor] else "NO"
        else:
            verdict = ("yes" if memory_ratio <= 1.5 else "NO") + " (memory only)"
        print(
            f"| {name} | "
            + " | ".join(f"{cells[length][name][0]:,.1f} / {cells[length][name][1]:,.1f}" for length in cells)
            + f" | {time_ratios[name]:.2f} | {memory_ratio:.2f} | {verdict} |"
        )


if __name__ == "__main__":
    main()
