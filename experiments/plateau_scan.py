"""From scratch, off the unigram plateau: which setting lets the MLM arm learn from context on 2 CPU cores, and does
MAE-LM leave the plateau there (issue 31, item 3).

    python -m experiments.plateau_scan prepare --corpus /usr/share/doc/python3.11/html/_sources
    python -m experiments.plateau_scan run NAME --method mlm --layers 4x256 --batch 32 --lr 5e-4 --warmup 0.06 ...
    python -m experiments.scan_summary                # experiments/scan/results.json, SCAN.md's tables, figures

Every arm trains through the package's own pre-training path (`build_trainer`, what `hf-encoders pretrain` runs) on
the corpus of experiments/corpus.py, and logs, besides the held-out masked-LM loss, the share of the gradient norm
that reaches the encoder's layers (every `--share-every` steps). Runs live under experiments/runs/scan/ (not
committed); scan_summary.py collects their curves into experiments/scan/.

Two references for "the plateau": the unigram entropy H of the corpus's tokens (experiments/report/runs.py), which is the
loss of a model that predicts token frequencies and reads nothing; and, for BERT's 80/10/10 masking, the lower loss a
model reaches by reading only the token AT the position (10% of the targets are left in place, 10% replaced by a
random token): `context_free_floor`. Only a loss below both says the model reads the context.
"""

import argparse
import json
import math
import os
import sys
import time
from collections import Counter
from functools import partial
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE / "runs" / "scan"
RESULTS = HERE / "scan"
FIGURES = HERE / "figures"


def prepare(sources: Path, vocab_size: int) -> None:
    """corpus.jsonl (one document per source file, as reproduce.py writes it) and a WordPiece tokenizer trained on
    it, under ROOT."""
    from hf_encoders.data.tokenizer import train_wordpiece_tokenizer

    from .corpus import read_sources

    ROOT.mkdir(parents=True, exist_ok=True)
    corpus = ROOT / "corpus.jsonl"
    if not corpus.exists():
        files = read_sources(sources)
        corpus.write_text(
            "".join(json.dumps({"text": "\n\n".join(p.text for p in file.paragraphs)}) + "\n" for file in files)
        )
    if not (ROOT / "tokenizer" / "tokenizer.json").exists():
        texts = [json.loads(line)["text"] for line in corpus.open()]
        train_wordpiece_tokenizer(texts, vocab_size=vocab_size).save_pretrained(ROOT / "tokenizer")
    print(json.dumps(plateaus(), indent=1))


def token_counts() -> Counter:
    from transformers import AutoTokenizer

    from hf_encoders.analysis.unigram import token_counts as count_tokens

    texts = [json.loads(line)["text"] for line in (ROOT / "corpus.jsonl").open()]
    return count_tokens(AutoTokenizer.from_pretrained(ROOT / "tokenizer"), texts)


def context_free_floor(counts: Counter, vocab_size: int, masked: float = 0.8, kept: float = 0.1) -> float:
    """The expected masked-LM loss of the best model that reads only the input token at a selected position, under
    BERT's masking: a share `masked` of the targets shows [MASK] (loss H), `kept` shows the target itself, and the
    rest a token drawn uniformly from the vocabulary (DataCollatorForLanguageModeling's random words). Seeing token s,
    the target is s with the posterior probability pi_s = kept p_s / (kept p_s + random / V), else drawn from p."""
    import numpy as np

    p = np.zeros(vocab_size)
    for token, count in counts.items():
        p[token] = count
    p /= p.sum()
    random = 1 - masked - kept
    plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0.0)
    entropy = -plogp.sum()
    stays = kept * p / (kept * p + random / vocab_size)
    # The log-probability of the shown token when it is the target; p_s times it is 0 for a token never seen.
    p_hit = np.where(p > 0, p * np.log(np.where(p > 0, stays + (1 - stays) * p, 1)), 0.0)
    # Shown = target (kept share): -sum_s p_s log(pi_s + (1 - pi_s) p_s).
    kept_loss = -p_hit.sum()
    # Shown uniform, target ~ p: -(1/V) sum_s [(1 - p_s) log(1 - pi_s) + sum_{t != s} p_t log p_t + p_s hit_s].
    random_loss = -np.mean((1 - p) * np.log(1 - stays) + (-entropy - plogp) + p_hit)
    return float(masked * entropy + kept * kept_loss + random * random_loss)


def validation_unigram_cross_entropy(seed: int = 0) -> float:
    """The held-out loss of a model that predicts the training pages' token frequencies (add-one smoothed): the
    plateau as the runs' evaluation sees it, on the pages `run` holds out (2%, drawn with the runs' seed)."""
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    from hf_encoders.data.corpus import load_documents
    from hf_encoders.training.validation import split_validation

    documents = load_documents(str(ROOT / "corpus.jsonl"))
    split = SimpleNamespace(validation_file=None, validation_split_percentage=2, text_column="text")
    training, validation = split_validation(documents, split, seed=seed)
    tokenizer = AutoTokenizer.from_pretrained(ROOT / "tokenizer")

    from hf_encoders.analysis.unigram import token_counts as count_tokens

    seen, held_out = count_tokens(tokenizer, training["text"]), count_tokens(tokenizer, validation["text"])
    total = sum(seen.values()) + len(tokenizer)
    return -sum(n * math.log((seen[token] + 1) / total) for token, n in held_out.items()) / sum(held_out.values())


def plateaus() -> dict:
    path = ROOT / "plateaus.json"
    if path.exists():
        return json.loads(path.read_text())
    from transformers import AutoTokenizer

    from .report.runs import unigram_entropy

    vocab_size = len(AutoTokenizer.from_pretrained(ROOT / "tokenizer"))
    result = {
        "unigram_entropy": unigram_entropy(ROOT),
        "context_free_floor_80_10_10": context_free_floor(token_counts(), vocab_size),
        "validation_unigram_cross_entropy": validation_unigram_cross_entropy(),
        "vocab_size": vocab_size,
    }
    path.write_text(json.dumps(result, indent=1))
    return result


def measuring_callback(every: int, encoder_prefix: str):
    """A TrainerCallback (made here, so that importing this file stays light) adding to every log the process's CPU
    seconds and, every `every` steps, the share of the gradient's norm in the encoder's layers (after clipping,
    which scales every parameter alike). PretrainingTrainer adds what `measures_for_log` returns to each log."""
    from transformers import TrainerCallback

    from .mae_lm_probe import gradient_share

    class Callback(TrainerCallback):
        def __init__(self):
            self.pending = None

        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            if (state.global_step + 1) % every and state.global_step:
                return
            self.pending = {"encoder_gradient_share": gradient_share(kwargs["model"], encoder_prefix)}

        def measures_for_log(self, state, logs):
            # CPU seconds of this one-thread process: its speed on a quiet machine, whoever else runs.
            measures = {"cpu_s": time.process_time()}
            if self.pending is not None and "loss" in logs:
                measures.update(self.pending)
                self.pending = None
            return measures

    return Callback()


def with_decoder_rate(optimizer, model, learning_rate: float):
    """Trainer's optimizer, its groups split so that MAE-LM's decoder and LM head (fresh in a continued encoder) peak
    at `learning_rate`; the scheduler scales every group alike."""
    fresh = {id(p) for name, p in model.named_parameters() if name.startswith(("decoder.", "lm_head."))}
    groups = []
    for group in optimizer.param_groups:
        settings = {key: value for key, value in group.items() if key != "params"}
        for is_fresh in (True, False):
            params = [p for p in group["params"] if (id(p) in fresh) == is_fresh]
            if params:
                groups.append({**settings, "params": params, "lr": learning_rate if is_fresh else group["lr"]})
    optimizer.param_groups.clear()  # torch keeps a group's settings with it: the new groups carry every one
    for group in groups:
        optimizer.add_param_group(group)
    return optimizer


def run(settings: argparse.Namespace) -> None:
    """One arm through the package's pre-training path; writes its log history and wall time to its folder."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from transformers import HfArgumentParser, TrainingArguments

    from hf_encoders.training.arguments import PretrainArguments
    from hf_encoders.training.pretrain import build_trainer

    torch.set_num_threads(1)
    output = ROOT / settings.name
    width_layers = settings.layers.split("x")
    layers, width = int(width_layers[0]), int(width_layers[1])
    shape = f"hidden_size={width},num_hidden_layers={layers},num_attention_heads={max(width // 64, 2)}"
    shape += f",intermediate_size={4 * width}"
    if settings.method == "mae_lm":
        shape += f",decoder_num_hidden_layers={settings.decoder_layers}"
    if settings.overrides:
        shape += "," + settings.overrides
    if settings.from_encoder:  # a pretrained encoder in its own vocabulary; only the decoder's shape may be set
        model = ["--model_name_or_path", settings.from_encoder, "--tokenizer_name", settings.from_encoder]
        model += ["--config_overrides", settings.overrides] if settings.overrides else []
    else:
        model = ["--tokenizer_name", str(ROOT / "tokenizer"), "--model_size", "small", "--config_overrides", shape]
    argv = [
        "--method", settings.method,
        "--corpus", str(ROOT / "corpus.jsonl"),
        *model,
        *(["--mask_in_encoder_fraction", str(settings.delta)] if settings.method == "mae_lm" else []),
        "--block_size", str(settings.block),
        "--per_device_train_batch_size", str(settings.batch),
        "--per_device_eval_batch_size", "64",
        "--max_steps", str(settings.steps),
        "--learning_rate", str(settings.lr),
        "--warmup_steps", str(settings.warmup),
        "--lr_scheduler_type", settings.schedule,
        "--weight_decay", "0.01",
        "--adam_beta2", str(settings.beta2),
        "--adam_epsilon", str(settings.eps),
        "--max_grad_norm", str(settings.clip),
        "--validation_split_percentage", "2",
        "--eval_strategy", "steps",
        "--eval_steps", str(settings.eval_every),
        "--logging_steps", "10",
        "--save_strategy", "no",
        "--report_to", "none",
        "--dataloader_pin_memory", "false",
        "--disable_tqdm", "true",
        "--seed", str(settings.seed),
        "--output_dir", str(output),
    ]  # fmt: skip
    args, training_args = HfArgumentParser((PretrainArguments, TrainingArguments)).parse_args_into_dataclasses(argv)
    trainer = build_trainer(args, training_args)
    if settings.all_mask:  # MAE-LM's masking for the BERT arm: every selected token becomes [MASK]
        for collator in (trainer.data_collator, trainer.eval_data_collator):
            collator.mask_replace_prob, collator.random_replace_prob = 1.0, 0.0
    prefix = "mae_lm.layers." if settings.method == "mae_lm" else "bert.encoder."
    trainer.add_callback(measuring_callback(settings.share_every, prefix))
    if settings.freeze_encoder_steps:
        trainer.add_callback(freezing_callback(trainer.model, settings.freeze_encoder_steps))
    if settings.decoder_lr:
        trainer.optimizer = with_decoder_rate(trainer.create_optimizer(), trainer.model, settings.decoder_lr)
    if settings.decoder_positions_from_encoder:
        trainer.model.decoder.position_embeddings.load_state_dict(
            trainer.model.mae_lm.embeddings.position_embeddings.state_dict()
        )
    started = time.monotonic()

    def record(finished: bool) -> None:
        """scan.json: the settings, the log history so far and the wall time, rewritten at every evaluation, so a
        run still going (or killed) can be summarised."""
        result = {
            "settings": vars(settings),
            "finished": finished,
            "wall_s": round(time.monotonic() - started),
            "log_history": trainer.state.log_history,
        }
        (output / "scan.json").write_text(json.dumps(result, indent=1))

    trainer.add_callback(recording_callback(record))
    trainer.train()
    trainer.save_model()
    record(finished=True)


def freezing_callback(model, steps: int):
    """Holds MAE-LM's encoder (without the word embeddings the LM head shares) still for the first `steps` steps:
    no gradient, so AdamW neither moves nor decays it, while the decoder learns where to look (collapse_probe)."""
    from transformers import TrainerCallback

    encoder = [p for n, p in model.named_parameters() if n.startswith("mae_lm.") and "word_embeddings" not in n]

    class Callback(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            for parameter in encoder:
                parameter.requires_grad_(state.global_step >= steps)

        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == steps:
                for parameter in encoder:
                    parameter.requires_grad_(True)

    return Callback()


def recording_callback(record):
    from transformers import TrainerCallback

    class Callback(TrainerCallback):
        def on_evaluate(self, args, state, control, **kwargs):
            record(finished=False)

    return Callback()


def masked_corpus_blocks(tokenizer, rows: int, length: int, seed: int, first_document: int = 0):
    """(input_ids, corrupted, labels): `rows` blocks of the corpus from `first_document` on, [CLS] ... [SEP], 15% of
    the inner tokens replaced by [MASK] (MAE-LM's masking, as the probe draws it)."""
    import torch

    from .mae_lm_probe import masked_blocks

    texts = [json.loads(line)["text"] for line in (ROOT / "corpus.jsonl").open()][first_document:]
    ids = tokenizer("\n\n".join(texts[:400]), add_special_tokens=False)["input_ids"]
    return masked_blocks(tokenizer, ids, rows, length, torch.Generator().manual_seed(seed))


def kept_masks(corrupted, mask_token_id: int, delta: float | None) -> dict:
    """MAE-LM's forward input saying which [MASK]s of `corrupted` stay in the encoder input (δ, the collator's
    decision in a run), drawn per token from the global RNG at the point the model drew them before δ moved to the
    collator, so the recorded probes stay reproducible; nothing for BERT (δ None) and δ = 0."""
    import torch

    if not delta:
        return {}
    return {"masks_in_encoder": (torch.rand(corrupted.shape) < delta) & (corrupted == mask_token_id)}


def output_gradient_common_mode(model, top_layer, corrupted, labels, compacted: bool, delta: float | None) -> float:
    """Backpropagates the masked-LM loss of `corrupted` (without dropout, leaving the gradients in the parameters)
    and returns the share of the energy of the gradient reaching `top_layer`'s output states that lies in each
    row's mean direction, averaged over rows: 1 when every position of a row gets the same gradient. `delta`: MAE-LM's
    δ (None for BERT). `compacted`: MAE-LM with δ = 0, whose encoder rows hold the kept tokens first, then padding,
    which is left out."""
    captured = {}

    def keep_gradient(module, args, output):
        states = output[0] if isinstance(output, tuple) else output  # BERT's layers return the tensor alone
        states.register_hook(lambda gradient: captured.setdefault("gradient", gradient))

    hook = top_layer.register_forward_hook(keep_gradient)
    training = model.training
    model.eval()
    mask_token_id = getattr(model.config, "mask_token_id", None)
    model(corrupted, labels=labels, **kept_masks(corrupted, mask_token_id, delta)).loss.backward()
    model.train(training)
    hook.remove()
    rows = captured["gradient"]
    if compacted:
        kept = (labels == -100).sum(-1)
        rows = [row[:n] for row, n in zip(rows, kept)]
    shares = [float(row.mean(0).square().sum() * len(row) / row.square().sum()) for row in rows]
    return sum(shares) / len(shares)


def init_probe(rows: int = 16, length: int = 128, seed: int = 0) -> dict:
    """At initialisation (4 x 256, decoder 2 layers), on `rows` blocks of the corpus masked as MAE-LM masks them:
    the gradient norm of the encoder's first layer and of all its layers, and how much of the gradient reaching
    the encoder's output states is common to every position of a row (the share of its energy in the row-mean
    direction): where the decoder reads the encoder only through near-uniform attention, every position gets the
    same gradient, which can move the row's mean state and nothing that tells tokens apart."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from hf_encoders.models.mae_lm import MaeLmConfig, MaeLmForMaskedLM

    from .mae_lm_probe import gradient_share

    tokenizer = AutoTokenizer.from_pretrained(ROOT / "tokenizer")
    _, corrupted, labels = masked_corpus_blocks(tokenizer, rows, length, seed)
    shape = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024)
    results = {}
    for name, delta in (("bert", None), ("mae_lm_delta_1", 1.0), ("mae_lm_delta_0", 0.0)):
        torch.manual_seed(seed)
        if delta is None:
            model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), **shape))
            layers, prefix = model.bert.encoder.layer, "bert.encoder.layer."
        else:
            config = MaeLmConfig(
                vocab_size=len(tokenizer), mask_token_id=tokenizer.mask_token_id, pad_token_id=0,
                decoder_num_hidden_layers=2, **shape,
            )  # fmt: skip
            model = MaeLmForMaskedLM(config)
            layers, prefix = model.mae_lm.layers, "mae_lm.layers."
        common = output_gradient_common_mode(model, layers[-1], corrupted, labels, compacted=delta == 0.0, delta=delta)
        norms = {n: p.grad.norm() for n, p in model.named_parameters() if p.grad is not None}
        first = sum(v**2 for n, v in norms.items() if n.startswith(prefix + "0.")) ** 0.5
        encoder = sum(v**2 for n, v in norms.items() if n.startswith(prefix)) ** 0.5
        results[name] = {
            "first_layer_gradient_norm": float(first),
            "encoder_gradient_norm": float(encoder),
            "encoder_gradient_share": gradient_share(model, prefix),
            "encoder_output_gradient_common_mode": common,
        }
    return results


# name: (δ, Adam's settings, gradient clip, peak learning rate, warm-up steps, rows per batch, steps the encoder's
# learning rate is held at 0 while the decoder learns)
FAIRSEQ_ADAM = dict(betas=(0.9, 0.98), eps=1e-6)
TORCH_ADAM = dict(betas=(0.9, 0.999), eps=1e-8)
COLLAPSE_VARIANTS = {
    "delta_1": (1.0, TORCH_ADAM, 1.0, 1e-3, 10, 8, 0),
    "delta_0": (0.0, TORCH_ADAM, 1.0, 1e-3, 10, 8, 0),
    "delta_0_fairseq_adam": (0.0, FAIRSEQ_ADAM, 2.0, 1e-3, 10, 8, 0),
    "delta_0_lr2e-4_warmup100": (0.0, FAIRSEQ_ADAM, 2.0, 2e-4, 100, 8, 0),
    "delta_1_lr2e-4_warmup100": (1.0, FAIRSEQ_ADAM, 2.0, 2e-4, 100, 8, 0),
    "delta_0_lr2e-4_warmup100_batch64": (0.0, FAIRSEQ_ADAM, 2.0, 2e-4, 100, 64, 0),
    "delta_0_encoder_frozen_60": (0.0, TORCH_ADAM, 1.0, 1e-3, 10, 8, 60),
}


def warm_up(step: int, steps: int, frozen: int = 0) -> float:
    return 0.0 if step < frozen else min(1.0, (step + 1) / steps)


def collapse_probe(names: list[str], steps: int = 150, every: int = 15, seed: int = 0) -> dict:
    """Does the encoder collapse onto one vector early in training, and with which δ and Adam settings? A 2 x 128
    MAE-LM (decoder 1 layer) trained `steps` steps of blocks of 128 tokens in each variant's setting (COLLAPSE_VARIANTS:
    δ, Adam, clip, rate, warm-up, batch, steps the encoder is held); every `every` steps, on 16 held-out blocks: the
    share of the encoder's top-layer energy in the mean direction (1 = every token the same vector, clean input), the
    common mode of the loss's gradient at that layer's output, and the encoder's share of the gradient norm."""
    import torch
    from transformers import AutoTokenizer

    from hf_encoders.models.mae_lm import MaeLmConfig, MaeLmForMaskedLM

    from .mae_lm_probe import gradient_share

    tokenizer = AutoTokenizer.from_pretrained(ROOT / "tokenizer")
    train_ids, _, _ = masked_corpus_blocks(tokenizer, 2048, 128, seed)
    probe_ids, probe_corrupted, probe_labels = masked_corpus_blocks(tokenizer, 16, 128, seed, first_document=-40)
    results = {}
    for name in names:
        delta, adam, clip, learning_rate, warmup, batch, frozen = COLLAPSE_VARIANTS[name]
        torch.manual_seed(seed)
        config = MaeLmConfig(
            vocab_size=len(tokenizer), mask_token_id=tokenizer.mask_token_id, pad_token_id=0, hidden_size=128,
            num_hidden_layers=2, num_attention_heads=2, intermediate_size=512, decoder_num_hidden_layers=1,
        )  # fmt: skip
        model = MaeLmForMaskedLM(config)
        # The encoder without the word embeddings, which the LM head shares.
        in_encoder = {n: n.startswith("mae_lm.") and "word_embeddings" not in n for n, _ in model.named_parameters()}
        encoder = [p for n, p in model.named_parameters() if in_encoder[n]]
        rest = [p for n, p in model.named_parameters() if not in_encoder[n]]
        optimizer = torch.optim.AdamW(
            [{"params": encoder}, {"params": rest}], lr=learning_rate, weight_decay=0.01, **adam
        )
        schedules = [partial(warm_up, steps=warmup, frozen=frozen), partial(warm_up, steps=warmup)]
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, schedules)
        curve = []
        for step in range(steps + 1):
            if step % every == 0:
                model.eval()
                with torch.no_grad():
                    states = model.mae_lm(probe_ids).last_hidden_state.flatten(0, 1).double()
                mean = states.mean(0)
                energy = float(mean.square().sum() / states.square().sum(-1).mean())
                common = output_gradient_common_mode(
                    model, model.mae_lm.layers[-1], probe_corrupted, probe_labels, compacted=delta == 0.0, delta=delta
                )
                share = gradient_share(model, "mae_lm.layers.")
                optimizer.zero_grad()
                curve.append(
                    {
                        "step": step,
                        "mean_direction_energy": energy,
                        "gradient_common_mode": common,
                        "encoder_gradient_share": share,
                    }
                )
            if step == steps:
                break
            model.train()
            rows = train_ids[torch.randint(len(train_ids), (batch,))]
            masked = torch.rand(rows.shape) < 0.15
            masked[:, [0, -1]] = False
            corrupted = rows.masked_fill(masked, tokenizer.mask_token_id)
            kept = kept_masks(corrupted, tokenizer.mask_token_id, delta)
            loss = model(corrupted, labels=rows.masked_fill(~masked, -100), **kept).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            if step % every == every - 1:
                curve[-1]["train_loss"] = float(loss.detach())
        results[name] = curve
    return results


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    prepare_parser = commands.add_parser("prepare")
    prepare_parser.add_argument("--corpus", type=Path, required=True)
    prepare_parser.add_argument("--vocab-size", type=int, default=8000)
    arm = commands.add_parser("run")
    arm.add_argument("name")
    arm.add_argument("--method", choices=("mlm", "mae_lm"), required=True)
    arm.add_argument("--layers", default="4x256", help="LAYERSxWIDTH of the encoder")
    arm.add_argument("--from-encoder", help="MAE-LM: start from this pretrained encoder (--layers is then unused)")
    arm.add_argument("--decoder-layers", type=int, default=2)
    arm.add_argument("--delta", type=float, default=0.0, help="MAE-LM: share of [MASK] kept in the encoder")
    arm.add_argument("--overrides", default="", help="further config fields, k=v,k=v")
    arm.add_argument("--freeze-encoder-steps", type=int, default=0, help="MAE-LM: hold the encoder still this long")
    arm.add_argument(
        "--decoder-positions-from-encoder", action="store_true", help="MAE-LM: the decoder's positions start as a copy"
    )
    arm.add_argument("--decoder-lr", type=float, help="MAE-LM: peak rate of the decoder and LM head (default --lr)")
    arm.add_argument("--all-mask", action="store_true", help="mlm: every selected token becomes [MASK] (no 80/10/10)")
    arm.add_argument("--block", type=int, default=128)
    arm.add_argument("--batch", type=int, default=32)
    arm.add_argument("--steps", type=int, default=800)
    arm.add_argument("--lr", type=float, default=5e-4)
    arm.add_argument("--warmup", type=float, default=0.06, help="steps, or a share of them below 1")
    arm.add_argument("--schedule", default="linear")
    arm.add_argument("--beta2", type=float, default=0.999)
    arm.add_argument("--eps", type=float, default=1e-8)
    arm.add_argument("--clip", type=float, default=1.0)
    arm.add_argument("--eval-every", type=int, default=100)
    arm.add_argument("--share-every", type=int, default=50)
    arm.add_argument("--seed", type=int, default=0)
    commands.add_parser("init-probe")
    collapse = commands.add_parser("collapse-probe")
    collapse.add_argument("variants", nargs="*", default=list(COLLAPSE_VARIANTS), help="default: every one")
    return parser


def main(argv: list[str] | None = None) -> int:
    settings = build_parser().parse_args(argv)
    if settings.command == "prepare":
        prepare(settings.corpus, settings.vocab_size)
    elif settings.command == "run":
        run(settings)
    elif settings.command == "init-probe":
        RESULTS.mkdir(exist_ok=True)
        result = init_probe()
        (RESULTS / "init_probe.json").write_text(json.dumps(result, indent=1))
        print(json.dumps(result, indent=1))
    else:
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / "collapse_probe.json"
        result = {**(json.loads(path.read_text()) if path.exists() else {}), **collapse_probe(settings.variants)}
        path.write_text(json.dumps(result, indent=1))
        print(
            json.dumps({name: [round(p["mean_direction_energy"], 3) for p in curve] for name, curve in result.items()})
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
