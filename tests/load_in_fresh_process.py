"""Child program of tests.helpers.run_in_fresh_process, run in an interpreter that cannot import hf_encoders:
loads every (auto class, checkpoint) job with trust_remote_code, runs the shared batch and writes the outputs.

Usage: load_in_fresh_process.py JOBS_JSON BATCH_SAFETENSORS OUT_SAFETENSORS
"""

import json
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file


def main(jobs_path: str, batch_path: str, out_path: str) -> None:
    with open(jobs_path) as file:
        jobs = json.load(file)
    batch = load_file(batch_path)
    results = {}
    for index, (auto_class, path) in enumerate(jobs):
        model = getattr(transformers, auto_class).from_pretrained(path, trust_remote_code=True).eval()
        with torch.no_grad():
            output = model(**batch)
        first = output.logits if getattr(output, "logits", None) is not None else output.to_tuple()[0]
        results[f"{index}"] = first.contiguous()
        results[f"{index}.auto_map"] = torch.tensor([len(model.config.auto_map)])
    # The parent checks it: loading must not have imported hf_encoders behind the checkpoint's back.
    results["hf_encoders_imported"] = torch.tensor([int("hf_encoders" in sys.modules)])
    save_file(results, out_path)


if __name__ == "__main__":
    main(*sys.argv[1:])
