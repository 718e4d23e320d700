"""`hf-encoders evaluate`: the fine-tuning protocol of *Should We Still Pretrain Encoders with Masked Language
Modeling?* (Gisserot-Boukhlef et al., 2025): SC, TC, QA and IR tasks x learning rates x seeds, for any encoder
checkpoint, with a report of the best rate per model and task and the spread across seeds."""

from .command import evaluate
from .finetune import RunSettings, fine_tune
from .grid import DEFAULT_LEARNING_RATES, DEFAULT_SEEDS, Protocol, run_grid
from .report import summarize, write_report
from .retrieval import fine_tune_retrieval
from .tasks import KINDS, MAIN_METRIC, Task, load_task
