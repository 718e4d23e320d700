"""hf_encoders.analysis against independent numpy computations: pair loops for the cosines, numpy's SVD
for the ranks, one unpadded sentence at a time for the streamed layer-wise report."""

import json
import os
import re
import shutil

import huggingface_hub
import numpy as np
import pytest
import torch
from transformers import (
    AutoModel,
    BertConfig,
    ModernBertConfig,
    PreTrainedTokenizerFast,
    RobertaConfig,
)

from hf_encoders.analysis import (
    LayerwiseReport,
    effective_rank,
    isotropy,
    layerwise_report,
    plot_layer_curves,
    plot_similarity_heatmap,
    self_similarity,
    similarity_matrix,
    token_similarity_matrix,
)
from hf_encoders.analysis.command import main as analyze
from hf_encoders.analysis.files import atomic_output
from hf_encoders.analysis.rank import GramAccumulator
from hf_encoders.errors import TokenizerLoadError
from tests.tiny_models import VOCAB_SIZE, tiny_mae_lm_config, tiny_tokenizer

TEXTS = [
    "the cat sat on the mat",
    "a dog ran in the park",
    "birds sing",
    "the old man and the sea went out to fish on a cold grey morning",
    "rain",
    "we read a long book about the history of the sea",
    "the dog and the cat sat in the sun",
    "morning rain on the old park",
]


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    """BERT's special tokens (ids 0-4, as the tiny configs expect), one id per word of TEXTS, and BERT's
    [CLS] text [SEP] around each sentence."""
    return tiny_tokenizer(words=sorted({word for text in TEXTS for word in text.split()}), cls_sep_template=True)


SHAPE = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    pad_token_id=0,
)
CONFIGS = {
    "bert": lambda: BertConfig(**SHAPE),
    "roberta": lambda: RobertaConfig(**SHAPE, max_position_embeddings=64),
    "modernbert": lambda: ModernBertConfig(
        **SHAPE, max_position_embeddings=64, bos_token_id=2, eos_token_id=3, cls_token_id=2, sep_token_id=3
    ),
    "mae_lm": tiny_mae_lm_config,
}


def build_encoder(model_type: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return AutoModel.from_config(CONFIGS[model_type]())


# ---- independent numpy references -------------------------------------------------------------------


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def numpy_self_similarity(sequences: list[np.ndarray]) -> float:
    """TaCL Eq. 3 by its double sum, averaged over the sequences that have a pair."""
    scores = []
    for tokens in sequences:
        n = len(tokens)
        if n > 1:
            pairs = [cosine(tokens[i], tokens[j]) for i in range(n) for j in range(n) if i != j]
            scores.append(sum(pairs) / (n * (n - 1)))
    return float(np.mean(scores))


def numpy_isotropy(sequences: list[np.ndarray]) -> float:
    cosines = [
        cosine(a, b)
        for s, first in enumerate(sequences)
        for t, second in enumerate(sequences)
        if s != t
        for a in first
        for b in second
    ]
    return float(np.mean(cosines))


def numpy_effective_rank(matrix: np.ndarray, threshold: float) -> int:
    energies = np.linalg.svd(matrix, compute_uv=False) ** 2
    share = np.cumsum(energies) / energies.sum()
    # The tolerance: rounding can leave the full share a hair below 1.
    return int(np.argmax(share >= threshold - 1e-12)) + 1


def padded_batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Random (layers=2, batch=4, seq=7, hidden=8) states, garbage in the padding, sequence lengths 7, 4, 1, 3."""
    lengths = [7, 4, 1, 3]
    generator = torch.Generator().manual_seed(seed)
    # A shared offset makes the cosines far from zero, like real anisotropic representations.
    hidden = torch.randn(2, 4, 7, 8, generator=generator, dtype=torch.float64) + torch.linspace(-1, 2, 8)
    mask = torch.arange(7) < torch.tensor(lengths)[:, None]
    hidden[:, ~mask] = 1e3 * torch.randn(int((~mask).sum()), 8, generator=generator, dtype=torch.float64)
    return hidden, mask, lengths


def unpadded(hidden: torch.Tensor, lengths: list[int]) -> list[np.ndarray]:
    return [hidden[row, :length].numpy() for row, length in enumerate(lengths)]


# ---- functions on in-memory tensors -----------------------------------------------------------------


def test_self_similarity_matches_pairwise_mean_and_ignores_padding():
    hidden, mask, lengths = padded_batch()
    values = self_similarity(hidden, mask)
    assert values.shape == (2,)
    for layer in range(2):
        expected = numpy_self_similarity(unpadded(hidden[layer], lengths))
        assert values[layer].item() == pytest.approx(expected, abs=1e-10)
        assert self_similarity(hidden[layer], mask).item() == pytest.approx(expected, abs=1e-10)


def test_similarity_matrix_matches_pairwise_cosines():
    tokens = padded_batch()[0][0, 0]
    matrix = similarity_matrix(tokens)
    expected = np.array([[cosine(a, b) for b in tokens.numpy()] for a in tokens.numpy()])
    np.testing.assert_allclose(matrix.numpy(), expected, atol=1e-10)


def test_isotropy_matches_mean_cosine_across_sequences_and_ignores_padding():
    hidden, mask, lengths = padded_batch(seed=1)
    values = isotropy(hidden, mask)
    for layer in range(2):
        assert values[layer].item() == pytest.approx(numpy_isotropy(unpadded(hidden[layer], lengths)), abs=1e-10)


def matrix_with_singular_values(singular_values: list[float], rows: int = 20, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    left, _ = np.linalg.qr(rng.standard_normal((rows, len(singular_values))))
    right, _ = np.linalg.qr(rng.standard_normal((len(singular_values), len(singular_values))))
    return left @ np.diag(singular_values) @ right.T


# Squared singular values 0.5, 0.25, 0.125, 0.0625, 0.0625: cumulative shares 0.5, 0.75, 0.875, 0.9375, 1.
@pytest.mark.parametrize(("threshold", "rank"), [(0.3, 1), (0.6, 2), (0.8, 3), (0.9, 4), (0.95, 5), (1.0, 5)])
def test_effective_rank_of_known_singular_values(threshold, rank):
    matrix = matrix_with_singular_values(np.sqrt([0.0625, 0.5, 0.125, 0.0625, 0.25]).tolist())
    assert effective_rank(torch.from_numpy(matrix), threshold).item() == rank
    # Scaling every singular value leaves every share, hence the rank, unchanged.
    assert effective_rank(torch.from_numpy(1e3 * matrix), threshold).item() == rank


def test_effective_rank_edge_cases():
    assert effective_rank(torch.zeros(5, 3)).item() == 0
    assert effective_rank(torch.ones(5, 3), threshold=1.0).item() == 1
    with pytest.raises(ValueError, match="threshold"):
        effective_rank(torch.ones(5, 3), threshold=0.0)


def test_streamed_gram_equals_in_memory_svd():
    rng = np.random.default_rng(0)
    # A decaying spectrum, so the thresholds below land on different ranks.
    rows = rng.standard_normal((3, 90, 16)) * np.geomspace(4, 0.1, 16) + rng.standard_normal(16)
    accumulator = GramAccumulator()
    for start, stop in [(0, 7), (7, 7), (7, 50), (50, 90)]:  # uneven chunks, one of them empty
        accumulator.update(torch.from_numpy(rows[:, start:stop]))
    assert accumulator.rows == 90
    for layer in range(3):
        np.testing.assert_allclose(
            np.sort(torch.linalg.eigvalsh(accumulator.gram[layer]).numpy()),
            np.sort(np.linalg.svd(rows[layer], compute_uv=False) ** 2),
            rtol=1e-9,
        )
    for threshold in (0.5, 0.8, 0.9, 0.99):
        expected = [numpy_effective_rank(rows[layer], threshold) for layer in range(3)]
        assert accumulator.effective_rank(threshold).tolist() == expected
        assert effective_rank(torch.from_numpy(rows), threshold).tolist() == expected
    assert len(set(accumulator.effective_rank(0.5).tolist() + accumulator.effective_rank(0.99).tolist())) > 1


# ---- the streamed layer-wise report -----------------------------------------------------------------


def sentence_by_sentence(model, tokenizer, texts, masks=None) -> list[list[np.ndarray]]:
    """Hidden states per sentence, one unpadded forward each: [sentence][layer] -> (tokens, hidden)."""
    states = []
    for index, text in enumerate(texts):
        input_ids = torch.tensor(tokenizer(text)["input_ids"])
        if masks is not None:
            input_ids[masks[index]] = tokenizer.mask_token_id
        with torch.no_grad():
            hidden_states = model(input_ids=input_ids[None], output_hidden_states=True).hidden_states
        states.append([layer[0].double().numpy() for layer in hidden_states])
    return states


def documented_masks(texts, tokenizer, probability: float, seed: int) -> list[torch.Tensor]:
    """The masking contract of `layerwise_report`: one uniform draw per token of each sentence, in corpus
    order, from torch.Generator().manual_seed(seed); [CLS] and [SEP] are never masked."""
    generator = torch.Generator().manual_seed(seed)
    masks = []
    for text in texts:
        chosen = torch.rand(len(tokenizer(text)["input_ids"]), generator=generator) < probability
        chosen[[0, -1]] = False
        masks.append(chosen)
    return masks


def stacked(states, layer: int, positions) -> np.ndarray:
    """One layer's rows of every sentence at the given positions, as one (tokens, hidden) matrix."""
    return np.concatenate([sentence[layer][where] for sentence, where in zip(states, positions)])


@pytest.mark.parametrize("model_type", list(CONFIGS))
def test_streamed_report_equals_in_memory_computation(model_type, tokenizer):
    model = build_encoder(model_type)
    model.train()  # the report must switch dropout off, and hand the model back as it found it
    report = layerwise_report(model, tokenizer, TEXTS, batch_size=3, mask_probability=0.4, seed=7, progress=False)
    assert model.training

    model.eval()
    masks = documented_masks(TEXTS, tokenizer, 0.4, seed=7)
    clean = sentence_by_sentence(model, tokenizer, TEXTS)
    masked = sentence_by_sentence(model, tokenizer, TEXTS, masks)

    real = [slice(1, -1)] * len(TEXTS)  # all but [CLS] and [SEP]
    masked_positions = [mask.numpy() for mask in masks]

    assert report.sentences == len(TEXTS)
    assert report.real_tokens == sum(len(text.split()) for text in TEXTS)
    assert report.mask_tokens == sum(int(mask.sum()) for mask in masks) > 0
    assert report.hidden_size == 32
    for layer in range(model.config.num_hidden_layers + 1):
        expected_similarity = numpy_self_similarity([sentence[layer] for sentence in clean])
        assert report.self_similarity[layer] == pytest.approx(expected_similarity, abs=1e-5)
        assert report.isotropy[layer] == pytest.approx(numpy_isotropy([s[layer][1:-1] for s in clean]), abs=1e-5)
        assert report.effective_rank[layer] == numpy_effective_rank(stacked(clean, layer, real), 0.9)
        assert report.effective_rank_with_mask[layer] == numpy_effective_rank(stacked(masked, layer, real), 0.9)
        assert report.mask_effective_rank[layer] == numpy_effective_rank(stacked(masked, layer, masked_positions), 0.9)


def test_self_similarity_can_leave_out_special_tokens(tokenizer):
    model = build_encoder("bert").eval()
    report = layerwise_report(model, tokenizer, TEXTS, batch_size=4, special_tokens_in_similarity=False, progress=False)
    clean = sentence_by_sentence(model, tokenizer, TEXTS)
    for layer in range(3):
        expected = numpy_self_similarity([sentence[layer][1:-1] for sentence in clean])
        assert report.self_similarity[layer] == pytest.approx(expected, abs=1e-5)


def test_masks_are_seeded_and_do_not_depend_on_batching(tokenizer):
    model = build_encoder("bert")
    one_by_one = layerwise_report(model, tokenizer, TEXTS, batch_size=1, progress=False)
    all_at_once = layerwise_report(model, tokenizer, iter(TEXTS), batch_size=len(TEXTS), progress=False)
    other_seed = layerwise_report(model, tokenizer, TEXTS, seed=1, progress=False)
    assert one_by_one.mask_tokens == all_at_once.mask_tokens
    assert 0 < one_by_one.mask_tokens < one_by_one.real_tokens
    assert one_by_one.mask_tokens != other_seed.mask_tokens
    for name in ("self_similarity", "isotropy"):
        np.testing.assert_allclose(getattr(one_by_one, name), getattr(all_at_once, name), atol=1e-5)
    for name in ("effective_rank", "effective_rank_with_mask", "mask_effective_rank"):
        assert getattr(one_by_one, name) == getattr(all_at_once, name)
    # The report is plain data.
    assert LayerwiseReport(**json.loads(json.dumps(one_by_one.to_dict()))) == one_by_one


def test_report_refuses_a_tokenizer_without_mask_token(tokenizer):
    no_mask = PreTrainedTokenizerFast(tokenizer_object=tokenizer.backend_tokenizer, pad_token="[PAD]")
    with pytest.raises(ValueError, match="mask token"):
        layerwise_report(build_encoder("bert"), no_mask, TEXTS, progress=False)


def test_token_similarity_matrix_of_one_sentence(tokenizer):
    model = build_encoder("roberta").eval()
    tokens, matrix = token_similarity_matrix(model, tokenizer, TEXTS[0])
    assert tokens == ["[CLS]", *TEXTS[0].split(), "[SEP]"]
    last_layer = sentence_by_sentence(model, tokenizer, TEXTS[:1])[0][-1]
    expected = np.array([[cosine(a, b) for b in last_layer] for a in last_layer])
    np.testing.assert_allclose(matrix.numpy(), expected, atol=1e-5)


# ---- plots and files ----------------------------------------------------------------------------------


def fake_report(name: str, offset: int) -> LayerwiseReport:
    return LayerwiseReport(
        model=name,
        hidden_size=32,
        sentences=10,
        real_tokens=80,
        mask_tokens=12,
        rank_threshold=0.9,
        self_similarity=[0.2, 0.4, 0.5],
        isotropy=[0.1, 0.3, 0.35],
        effective_rank=[20 - offset, 15, 12],
        effective_rank_with_mask=[21, 19, 18 - offset],
        mask_effective_rank=[1, 4 + offset, 9],
    )


def assert_png(path):
    with open(path, "rb") as file:
        assert file.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(path) > 10_000  # axes, curves and text, not an empty canvas
    assert not [name for name in os.listdir(os.path.dirname(path)) if name.endswith(".partial")]


def test_plots_are_written_and_not_empty(tmp_path):
    curves = plot_layer_curves([fake_report("bert", 0), fake_report("tacl", 3)], tmp_path / "curves.png")
    assert_png(curves)
    tokens = ["[CLS]", "the", "cat", "sat", "[SEP]"]
    matrix = torch.rand(5, 5, dtype=torch.float64)
    heatmap = plot_similarity_heatmap(tokens, matrix, tmp_path / "plots" / "heatmap.png", title="bert")
    assert_png(heatmap)


def test_atomic_output_publishes_only_complete_files(tmp_path):
    target = tmp_path / "report.json"
    with pytest.raises(RuntimeError), atomic_output(target) as temporary:
        temporary.write_text("{half")
        raise RuntimeError("crash mid-write")
    assert os.listdir(tmp_path) == []
    with atomic_output(target) as temporary:
        temporary.write_text("{}")
        assert not target.exists()
    assert os.listdir(tmp_path) == ["report.json"] and target.read_text() == "{}"
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # an ordinary file's mode, not mkstemp's 0600


# ---- the command ------------------------------------------------------------------------------------


def test_analyze_command_writes_report_and_plots(tmp_path, tokenizer):
    for model_type in ("bert", "mae_lm"):
        build_encoder(model_type).save_pretrained(tmp_path / model_type)
        tokenizer.save_pretrained(tmp_path / model_type)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The cat sat on the mat. A dog ran in the park.\n\nBirds sing. The old man and the sea.\n")
    output = tmp_path / "analysis"

    status = analyze(
        [
            str(tmp_path / "bert"),
            str(tmp_path / "mae_lm"),
            "--corpus",
            str(corpus),
            "--output_dir",
            str(output),
            "--batch_size",
            "3",
            "--max_sentences",
            "3",
            "--device",
            "cpu",
        ]
    )

    assert status == 0
    written = json.loads((output / "report.json").read_text())
    assert written["settings"]["sentences"] == 3
    assert written["settings"]["heatmap_text"] == "The cat sat on the mat."  # no sentence has 8 words
    assert [report["model"] for report in written["models"]] == ["bert", "mae_lm"]
    for report in written["models"]:
        assert report["sentences"] == 3 and len(report["effective_rank"]) == 3  # embeddings + 2 layers
    plots = ["layer_curves.png", "similarity_bert.png", "similarity_mae_lm.png"]
    for name in plots:
        assert_png(output / name)
    assert sorted(os.listdir(output)) == sorted([*plots, "report.json"])


def test_analyze_command_takes_labels_and_checks_their_count(tmp_path, tokenizer):
    build_encoder("bert").save_pretrained(tmp_path / "student")
    tokenizer.save_pretrained(tmp_path / "student")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The cat sat on the mat. A dog ran in the park.\n")
    common = [
        str(tmp_path / "student"),
        "--corpus",
        str(corpus),
        "--output_dir",
        str(tmp_path / "out"),
        "--device",
        "cpu",
    ]
    assert analyze([*common, "--labels", "tacl"]) == 0
    assert json.loads((tmp_path / "out" / "report.json").read_text())["models"][0]["model"] == "tacl"
    assert_png(tmp_path / "out" / "similarity_tacl.png")
    with pytest.raises(ValueError, match="--labels names 2 model"):
        analyze([*common, "--labels", "a", "b"])


def test_analyze_names_a_missing_model_before_analysing_any(tmp_path, tokenizer):
    build_encoder("bert").save_pretrained(tmp_path / "good")
    tokenizer.save_pretrained(tmp_path / "good")
    missing = tmp_path / "typo"
    output = tmp_path / "out"
    message = f"cannot load a tokenizer from '{re.escape(str(missing))}'.*Pass checkpoint folders"
    with pytest.raises(TokenizerLoadError, match=message):
        analyze([str(tmp_path / "good"), str(missing), "--output_dir", str(output), "--device", "cpu"])
    assert not output.exists() or not os.listdir(output), "the first model was analysed before the second was checked"


def test_a_training_state_is_named_with_the_folder_to_pass_after_the_others_are_analysed(tmp_path, tokenizer):
    build_encoder("bert").save_pretrained(tmp_path / "good")
    tokenizer.save_pretrained(tmp_path / "good")
    state = tmp_path / "tacl"  # what pretrain --method tacl writes: the state, and the student inside it
    shutil.copytree(tmp_path / "good", state / "student")
    (state / "config.json").write_text('{"model_type": "tacl"}')
    stopped = tmp_path / "stopped"  # a run stopped before its final model: checkpoints only
    (stopped / "checkpoint-3").mkdir(parents=True)
    (stopped / "checkpoint-3" / "trainer_state.json").write_text("{}")
    output = tmp_path / "out"
    models = [str(state), str(tmp_path / "good"), str(stopped)]
    with pytest.raises(ValueError) as refused:
        analyze([*models, "--labels", "t", "g", "s", "--output_dir", str(output), "--device", "cpu"])
    assert str(refused.value) == (
        f"analysed 1 model(s) into {output}; skipped 2 MODEL(s): {state} is a TaCL training state (student and "
        f"teacher), not an encoder: pass {state / 'student'}, the encoder it trained. {stopped} holds the "
        f"checkpoints of a run stopped before its final model: pass {stopped / 'checkpoint-3'}, or finish the run "
        "first (hf-encoders pretrain ... --resume_from_checkpoint true)."
    )
    assert [model["model"] for model in json.loads((output / "report.json").read_text())["models"]] == ["g"]
    with pytest.raises(ValueError, match=f"^{re.escape(str(state))} is a TaCL training state"):
        analyze([str(state), "--output_dir", str(tmp_path / "none"), "--device", "cpu"])
    assert not (tmp_path / "none").exists()


def test_a_folder_without_a_model_is_named_with_the_models_inside_it(tmp_path, tokenizer):
    runs = tmp_path / "runs"  # a parent of output folders, passed instead of one of them
    build_encoder("bert").save_pretrained(runs / "first")
    tokenizer.save_pretrained(runs / "first")
    (runs / "notes").mkdir()
    with pytest.raises(ValueError) as refused:
        analyze([str(runs), "--output_dir", str(tmp_path / "out"), "--device", "cpu"])
    assert str(refused.value) == f"{runs} holds no model (no config.json); the models inside it: {runs / 'first'}."
    (runs / "first" / "config.json").unlink()
    with pytest.raises(ValueError, match=f"^{re.escape(str(runs))} holds no model \\(no config.json\\)\\.$"):
        analyze([str(runs), "--output_dir", str(tmp_path / "out"), "--device", "cpu"])


def test_a_path_that_does_not_exist_is_named_as_such(tmp_path, monkeypatch):
    """A missing local path is said in its own words; one shaped like a Hub id (out/first) also gets the Hub's
    reason."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.chdir(tmp_path)
    for missing, reason in ((str(tmp_path / "out" / "first"), r"\. Pass"), ("out/first", " and HF_HUB_OFFLINE is set")):
        with pytest.raises(
            TokenizerLoadError, match=f"^cannot load a tokenizer from '{re.escape(missing)}': no such folder{reason}"
        ):
            analyze([missing, "--output_dir", str(tmp_path / "analysis"), "--device", "cpu"])
