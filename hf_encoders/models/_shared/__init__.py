"""The sources of the files every model folder holds a copy of (checkpoint_io.py, loss_utils.py, packed_sequences.py,
task_heads.py). A model folder is flat, because every checkpoint carries it as remote code, so it cannot import these;
each copy's first line names its source. Edit the source, then run `python utils/check_copies.py --fix_and_overwrite`.
The package's own code imports the sources."""
