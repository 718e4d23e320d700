"""Every method trains under `torchrun` with Trainer unchanged (DDP, 2 CPU processes, gloo).

One `torchrun --nproc_per_node 2` launch runs tests/distributed_worker.py, which trains the real `build_trainer`
Trainer of mlm, mae_lm, tacl and biphasic (clm:0.5,mlm:0.5) one after the other for 4 steps, 2 examples per rank,
and writes each rank's final weights, the digest of every forward's inputs, the logged losses and what DDP
registered for gradient reduction. The tests then check that

* the launch exits with 0 and each run really was DDP over 2 ranks on gloo, every rank reading different data;
* both ranks end with bit-identical weights and log identical losses;
* DDP's reducer holds exactly the parameters that require gradients: TaCL's teacher is not among them, gets no
  gradient, is not in the optimizer, and ends equal to the encoder TaCL started from while the student moved;
* the biphasic objective switches from CLM to MLM on the same step on both ranks (the objective each forward
  actually ran with is recorded);
* the 2-process run equals a 1-process run of the same global batch, mae_lm's with its masking rate and block
  length switching halfway (see
  `test_two_processes_match_one_process_with_the_same_global_batch`);
* MAE-LM's encoder held still (`--hold_encoder_steps`) gets no update under DDP, weight decay on, until the hold ends.

FSDP2 (`fully_shard`, which gloo supports on CPU) on each method as its `examples/fsdp*.json` configures it: the
layers accelerate wraps are the model's layer classes, ranks end equal and equal to one process on the whole batch, TaCL's
teacher never moves, and the checkpoint saved from the sharded model is the ordinary one (its own class in
`auto_map`, the model folder's code), loadable in a fresh process.

A streamed corpus under DDP: each rank reads, packs and trains on its own part of the stream, the parts disjoint and
together the whole corpus, and resumes from its own saved position in it.

And the entry point around Trainer under DDP: without `--tokenizer_name` every rank uses the one tokenizer the main
process trained; a `--tokenized_dir` with no cache yet is built by the main process alone and read by every rank; `pretrain()` writes its post-training files (loss curve, card, TaCL student) on the main process
only; the model card counts the tokens of every rank; TaCL's logged loss terms are means over ranks.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import BertModel

from hf_encoders import MaeLmForMaskedLM
from hf_encoders.data.corpus import load_documents
from hf_encoders.training.pretrain import build_trainer
from tests.distributed_worker import (
    FSDP_CONFIGS,
    FSDP_KNOWN_FAILURES,
    MAX_STEPS,
    METHODS,
    SCHEDULES,
    STREAMED_DOCUMENTS,
    ForwardRecorder,
    final_state,
    fsdp_model,
    logged_losses,
    method_arguments,
    train_fsdp_steps,
    training_arguments,
)
from tests.helpers import model_folder_files, run_in_fresh_process
from tests.method_specs import fsdp_wrap_classes
from tests.tiny_models import sample_batch, save_tiny_bert

REPO_ROOT = Path(__file__).parent.parent
RANKS = (0, 1)


@pytest.fixture(scope="module")
def bert_init(tmp_path_factory):
    """A tiny BERT with NSP head and its tokenizer (as in test_resume.py), without dropout so that runs over
    different process counts can agree exactly: TaCL continues it, the other methods use its tokenizer."""
    return save_tiny_bert(tmp_path_factory.mktemp("bert"), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@pytest.fixture(scope="module")
def ddp_runs(bert_init, tmp_path_factory) -> Path:
    output_dir = tmp_path_factory.mktemp("ddp")
    # --standalone: torchrun's own rendezvous on localhost picks a free port (no race over a port chosen here).
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "--module",
        "tests.distributed_worker",
        "--model_name_or_path",
        bert_init,
        "--output_dir",
        str(output_dir),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    # Its own session, so a hang (a collective one rank never reaches) is ended with both workers, not just torchrun.
    launch = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = launch.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(launch.pid, signal.SIGKILL)
        stdout, stderr = launch.communicate()
        pytest.fail(f"torchrun did not finish in 300 s:\n{stdout[-4000:]}\n{stderr[-8000:]}")
    assert launch.returncode == 0, f"torchrun exited with {launch.returncode}:\n{stdout[-4000:]}\n{stderr[-8000:]}"
    return output_dir


def records(ddp_runs: Path, method: str) -> list[dict]:
    return [json.loads((ddp_runs / method / f"rank{rank}.json").read_text()) for rank in RANKS]


def weights(ddp_runs: Path, method: str, rank: int) -> dict[str, torch.Tensor]:
    return torch.load(ddp_runs / method / f"rank{rank}.pt")


@pytest.mark.parametrize("method", METHODS)
def test_every_rank_ends_with_the_same_weights(method, ddp_runs):
    ranks = records(ddp_runs, method)
    for rank, record in zip(RANKS, ranks):
        assert (record["world_size"], record["process_index"], record["backend"]) == (2, rank, "gloo")
        assert record["ddp"]["wrapper"] == "DistributedDataParallel"
        assert [forward["step"] for forward in record["forwards"]] == list(range(1, MAX_STEPS + 1))
    # The data were sharded: no step fed both ranks the same batch.
    assert all(a["inputs"] != b["inputs"] for a, b in zip(ranks[0]["forwards"], ranks[1]["forwards"]))
    # Trainer logs the cross-rank mean, so both ranks log the same losses.
    assert ranks[0]["losses"] == ranks[1]["losses"] and len(ranks[0]["losses"]) == MAX_STEPS
    first, second = weights(ddp_runs, method, 0), weights(ddp_runs, method, 1)
    assert first.keys() == second.keys()
    for name in first:
        assert torch.equal(first[name], second[name]), f"{name} differs between rank 0 and rank 1"


@pytest.mark.parametrize("method", METHODS)
def test_ddp_reduces_exactly_the_trainable_parameters(method, ddp_runs):
    for record in records(ddp_runs, method):
        ddp = record["ddp"]
        assert (ddp["reducer_tensors"], ddp["reducer_bytes"]) == (ddp["trainable_tensors"], ddp["trainable_bytes"])
        if method != "tacl":
            assert ddp["frozen_tensors"] == 0


def test_the_tacl_teacher_stays_frozen_and_out_of_ddp(bert_init, ddp_runs):
    encoder = BertModel.from_pretrained(bert_init, add_pooling_layer=False)
    initial = encoder.state_dict()
    teacher_bytes = sum(p.numel() * p.element_size() for p in encoder.parameters())
    for rank, record in zip(RANKS, records(ddp_runs, "tacl")):
        ddp = record["ddp"]
        assert not ddp["teacher_requires_grad"] and not ddp["teacher_has_grad"] and not ddp["teacher_in_optimizer"]
        # The frozen parameters are the teacher's, and DDP's reducer holds none of them (previous test: the
        # reducer's tensor count and bytes equal the trainable parameters', these are the rest).
        assert ddp["frozen_bytes"] == teacher_bytes > 0
        final = weights(ddp_runs, "tacl", rank)
        teacher = {name.removeprefix("teacher."): value for name, value in final.items() if name.startswith("teacher.")}
        assert teacher.keys() == initial.keys()
        for name, value in initial.items():
            assert torch.equal(teacher[name], value), f"the teacher's {name} moved"
        student = {
            name.removeprefix("student.bert."): value
            for name, value in final.items()
            if name.startswith("student.bert.")
        }
        assert not torch.equal(
            student["encoder.layer.0.attention.self.query.weight"],
            initial["encoder.layer.0.attention.self.query.weight"],
        )


def test_biphasic_phases_switch_on_the_same_step_on_every_rank(ddp_runs):
    switch = MAX_STEPS // 2  # clm:0.5,mlm:0.5
    expected = [(step, "clm" if step <= switch else "mlm") for step in range(1, MAX_STEPS + 1)]
    for record in records(ddp_runs, "biphasic"):
        assert [(forward["step"], forward["objective"]) for forward in record["forwards"]] == expected
        losses = {int(step): loss for step, loss in record["losses"].items()}
        assert sorted(losses) == list(range(1, MAX_STEPS + 1))


@pytest.mark.parametrize("method", METHODS)
def test_two_processes_match_one_process_with_the_same_global_batch(method, bert_init, ddp_runs, tmp_path):
    """2 processes x 2 examples against 1 process x 2 examples x 2 gradient-accumulation steps: the same 4 examples
    per optimizer step, fed to the model in the same 2-example batches with the same masks, so the same weights.

    Why accumulation rather than 1 process x 4 examples:
    * Data order. Trainer's sampler is accelerate's SeedableRandomSampler (seeded from `seed`) in both runs, and
      under DDP accelerate's BatchSamplerShard hands batch 2k of that permutation to rank 0 and batch 2k+1 to
      rank 1: exactly the two micro-batches of step k of the single process. The test checks it: forward k of
      rank r has the same input digest as forward 2k+r of the single process.
    * Masks. The collators seed each batch's masks from (seed, epoch, the batch's token ids); a 4-example batch
      hashes to another seed than its two 2-example halves, so 1 x 4 would mask different tokens. With 2-example
      micro-batches the masked inputs are identical (the input digest covers masked ids and labels).
    * Loss scale. TaCL and biphasic average their loss over their own batch (accepts_loss_kwargs=False): DDP
      averages the two ranks' means, gradient accumulation too; over 4 examples at once it would be a mean over
      all anchors, a different number. mlm and mae_lm divide by Trainer's `num_items_in_batch`, which counts the
      whole global batch in both runs.
    * Dropout is off (bert_init, `tiny_run_options(..., dropout=False)`): both ranks start from one seed, so their
      dropout draws differ from the single process's.
    What remains is float summation order (all-reduce then /2 against accumulating /2 terms): losses agree to
    1e-5 relative, weights to 2e-5 absolute (below).
    """
    single = build_trainer(
        method_arguments(method, bert_init, **SCHEDULES.get(method, {})),
        training_arguments(tmp_path, per_device=2, accumulation=2),
    )
    recorder = ForwardRecorder(single)
    single.train()

    ranks = records(ddp_runs, method)
    assert len(recorder.forwards) == 2 * MAX_STEPS
    if method in SCHEDULES:  # the schedules were in force, switching at step 3
        rates = [entry["mlm_probability"] for entry in single.state.log_history if "loss" in entry]
        assert rates == [0.5, 0.5, 0.15, 0.15] and len(single.train_dataset) == 4 * MAX_STEPS
    for rank, record in zip(RANKS, ranks):
        for k, forward in enumerate(record["forwards"]):
            assert forward == recorder.forwards[2 * k + rank], f"step {k + 1}: rank {rank} was fed another batch"
    losses = {str(step): loss for step, loss in logged_losses(single).items()}
    assert losses.keys() == ranks[0]["losses"].keys()
    for step, loss in losses.items():
        assert loss == pytest.approx(ranks[0]["losses"][step], rel=1e-5), f"step {step}"
    distributed = weights(ddp_runs, method, 0)
    for name, value in final_state(single.model).items():
        # atol: DDP sums the two halves' gradients in another order than one process does, and AdamW divides each
        # element's step by its own gradient's size, so an element whose gradient is near 0 (a rare token's
        # embedding) carries that rounding into its update: after 4 steps, up to 2e-6 in most runs and 9e-6 once
        # (MAE-LM, 2 of 19,200 word-embedding elements). A batch fed to the wrong rank moves elements by about the
        # rate, 1e-3 a step, and the forwards' digests above catch it first.
        torch.testing.assert_close(
            value, distributed[name], rtol=1e-5, atol=2e-5, msg=lambda m, name=name: f"{name}: {m}"
        )


def test_each_rank_streams_its_own_part_of_the_corpus(ddp_runs):
    ranks = [json.loads((ddp_runs / "streamed" / f"rank{rank}.json").read_text()) for rank in RANKS]
    corpus = list(load_documents(streaming=True).take(STREAMED_DOCUMENTS)["text"])
    first, second = (record["documents"] for record in ranks)
    assert not set(first) & set(second) and sorted(first + second) == sorted(corpus)
    for record in ranks:  # each rank trained on the blocks packed from its own documents, in their order
        assert len(record["trained"]) == MAX_STEPS * 2 and record["trained"] == record["own_blocks"]
        # and, resumed from step 2, goes on from its own position: steps 3 and 4 (2 rows each) again
        assert record["trained_after_resuming"] == record["trained"][2 * 2 :]
    assert not {tuple(block) for block in ranks[0]["trained"]} & {tuple(block) for block in ranks[1]["trained"]}


def test_ddp_holds_the_encoder_exactly_still_then_trains_it(bert_init, ddp_runs):
    """Held parameters are unused in DDP's eyes: had DDP handed them zero gradients, AdamW's weight decay would move
    them during the hold."""
    start = MaeLmForMaskedLM.from_encoder(bert_init).state_dict()
    held = [name for name in start if name.startswith("mae_lm.") and "word_embeddings" not in name]
    ranks = [torch.load(ddp_runs / "held" / f"rank{rank}.pt") for rank in RANKS]
    for weights in ranks:
        assert all(torch.equal(weights["after_hold"][name], start[name]) for name in held)
        assert sum(not torch.equal(weights["final"][name], start[name]) for name in held) > len(held) / 2
    torch.testing.assert_close(ranks[0]["final"], ranks[1]["final"], rtol=0, atol=0)


def test_a_tokenizer_trained_on_the_spot_is_the_same_on_every_rank(ddp_runs):
    first, second = (json.loads((ddp_runs / "tokenizer" / f"rank{rank}.json").read_text()) for rank in RANKS)
    assert first == second


def test_only_the_main_process_builds_a_token_cache_and_every_rank_reads_it(ddp_runs):
    first, second = records(ddp_runs, "token_cache")
    assert (first["built"], second["built"]) == (1, 0)
    assert first["blocks"] > 0 and first["digest"] == second["digest"]


def test_hf_encoders_pretrain_writes_its_files_on_the_main_process_only(ddp_runs):
    """The CLI entry point as a whole (`hf-encoders pretrain --method tacl`), after Trainer's own save_model."""
    main, other = (json.loads((ddp_runs / "cli" / f"rank{rank}.json").read_text()) for rank in RANKS)
    assert main["error"] is None and other["error"] is None, main["error"] or other["error"]
    # The output folder's card (the training state), then the student with its own card.
    assert main["calls"] == ["loss_curve", "model_card", "export_student", "model_card"]
    assert other["calls"] == []
    # A finished run destroys its process group, which gloo's threads could otherwise abort the exit with.
    assert not main["process_group_left"] and not other["process_group_left"]


def test_the_model_card_counts_the_tokens_of_every_rank(ddp_runs):
    card = (ddp_runs / "cli" / "run" / "README.md").read_text()
    # 2 steps x 2 examples x 2 ranks x block_size 32
    assert "- tokens seen: about 256" in card


def test_tacl_logged_loss_terms_are_means_over_all_ranks(ddp_runs):
    # tacl_loss_weight = mlm_loss_weight = nsp_loss_weight = 1 (in one process the identity holds to 1e-7).
    for record in records(ddp_runs, "tacl"):
        for entry in record["log_history"]:
            terms = entry["tacl_loss"] + entry["mlm_loss"] + entry["nsp_loss"]
            assert terms == pytest.approx(entry["loss"], rel=1e-5), f"step {entry['step']}"


FSDP_WORKING = sorted(set(FSDP_CONFIGS) - set(FSDP_KNOWN_FAILURES))


@pytest.mark.parametrize("method", FSDP_WORKING)
def test_fsdp2_shards_every_layer_class_of_the_model(method, ddp_runs):
    layers = fsdp_wrap_classes(fsdp_model(method))
    for rank in RANKS:
        record = json.loads((ddp_runs / f"fsdp-{method}" / f"rank{rank}.json").read_text())
        assert record["wrapped"] == layers, "the example config does not make accelerate wrap the model's layers"
        assert record["sharded_parameters"] == record["parameters"] > 0
        assert record["model_class"].startswith("FSDP")


@pytest.mark.parametrize("method", FSDP_WORKING)
def test_fsdp2_ranks_agree_with_one_process_and_the_teacher_stays(method, ddp_runs):
    first, second = (torch.load(ddp_runs / f"fsdp-{method}" / f"rank{rank}.pt") for rank in RANKS)
    single = fsdp_model(method)
    initial = final_state(single)
    train_fsdp_steps(single, method, slice(0, 4))
    for name, value in final_state(single).items():
        assert torch.equal(first[name], second[name]), name
        # atol: a parameter whose gradient is ~0 (TaCL's key biases) moves by AdamW's normalised noise.
        torch.testing.assert_close(first[name], value, rtol=1e-5, atol=1e-5, msg=lambda m, name=name: f"{name}: {m}")
    if method.startswith("tacl"):
        teacher = [name for name in initial if name.startswith("teacher.")]
        assert teacher and all(torch.equal(first[name], initial[name]) for name in teacher)
        assert any(not torch.equal(first[name], initial[name]) for name in initial if name.startswith("student."))


def test_fsdp2_still_refuses_bert_shared_output_bias(ddp_runs):
    """accelerate 1.15 groups the tied input and output embeddings, but BERT's output layer also shares its bias
    with `cls.predictions.bias`, which stays in the root group; torch 2.13 refuses a parameter seen by two groups.
    docs/distributed.md documents this; when this test fails, the dependency bug is fixed: update the docs."""
    for rank in RANKS:
        record = json.loads((ddp_runs / "fsdp-tacl-bert" / f"rank{rank}.json").read_text())
        assert "cls.predictions" in record["error"] and "already managed by another FSDP group" in record["error"]


def test_a_checkpoint_saved_from_fsdp2_is_the_ordinary_one(ddp_runs, tmp_path):
    """Trainer's save_model calls save_pretrained on the sharded model, whose class FSDP2 swapped for one defined
    in torch: the checkpoint must still name the model's own class and carry the model folder's code."""
    jobs, expected = [], []
    for method in FSDP_WORKING:
        checkpoint = ddp_runs / f"fsdp-{method}" / "checkpoint"
        model_class = type(fsdp_model(method))
        config = json.loads((checkpoint / "config.json").read_text())
        assert config["architectures"] == [model_class.__name__]
        assert config["auto_map"] == model_class.config_class.default_auto_map
        assert {path.name for path in checkpoint.glob("*.py")} == model_folder_files(model_class)
        model = model_class.from_pretrained(checkpoint).eval()
        torch.testing.assert_close(final_state(model), torch.load(ddp_runs / f"fsdp-{method}" / "rank0.pt"))
        with torch.no_grad():
            expected.append(model(**sample_batch()).logits)
        jobs.append(("AutoModelForPreTraining", str(checkpoint)))
    results = run_in_fresh_process(jobs, sample_batch(), tmp_path)
    for index, logits in enumerate(expected):
        torch.testing.assert_close(results[f"{index}"], logits, msg=jobs[index][1])
