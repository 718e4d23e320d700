"""Each step's wall time, and whether it ran alone.

Wall time on a shared machine says little unless we know what ran beside it. So while a step runs (a subprocess, or work
in this process such as the MAE-LM probe), a thread samples the 1-minute load average every few seconds and counts the
other processes that kept part of a core busy since the last sample (not this run's own); when the step ends, the CPU
time it used is read (while it runs, that of its running subprocesses too: a step killed before its end still leaves
what it used so far, see `measuring`'s `on_sample`). The load beyond the step's own (CPU seconds / wall seconds: the
cores it kept busy) is what others added: a step ran alone when that stayed under half a core and no other busy process
was seen.
"""

import contextlib
import os
import resource
import statistics
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

import psutil

# The share of a core a process must use, between two samples, to count as running beside the step.
BUSY = 0.2
# Load (in cores) others may add before a step no longer counts as measured alone.
ALONE_LOAD = 0.5
# What a timings.json record says besides its Measurement: the step's experiment, and whether the step ran to its end.
RECORD_LABELS = ("experiment", "finished")


@dataclass
class Measurement:
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # user + system time of this process and its finished children during the step
    load_average: float = 0.0  # mean of the 1-minute load average over the step
    other_processes: int = 0  # most other busy processes seen at once
    sessions: int = 1  # how many runs of the script the step took (a resumed step adds its sessions up)
    loads: list[float] = field(default_factory=list, repr=False)

    @property
    def others_load(self) -> float:
        """Cores' worth of load that was not the step's own."""
        return max(0.0, self.load_average - self.cpu_seconds / max(self.seconds, 1e-9))

    @property
    def alone(self) -> bool:
        return self.other_processes == 0 and self.others_load < ALONE_LOAD

    def after(self, earlier: dict | None) -> "Measurement":
        """This session's measurement added to an earlier session's of the same step (a dict from `as_dict`)."""
        if not earlier:
            return self
        before = Measurement(**earlier)
        seconds = before.seconds + self.seconds
        return Measurement(
            seconds=seconds,
            cpu_seconds=before.cpu_seconds + self.cpu_seconds,
            load_average=(before.load_average * before.seconds + self.load_average * self.seconds) / max(seconds, 1e-9),
            other_processes=max(before.other_processes, self.other_processes),
            sessions=before.sessions + self.sessions,
        )

    def as_dict(self) -> dict:
        return {name: round(value, 2) for name, value in asdict(self).items() if name != "loads"}


class OtherProcesses:
    """Counts, between two calls, the processes that kept at least BUSY of a core busy and are not this process, one
    of its descendants or one of its ancestors (the shell that started the experiments): other experiments, other
    people's tests, anything that competes for the cores."""

    def __init__(self):
        self.cpu_times = {}  # pid -> CPU seconds at the previous call
        self.last_call = time.monotonic()
        self.busy()  # the first snapshot

    def busy(self) -> int:
        this = psutil.Process()
        own = {this.pid, *(p.pid for p in this.children(recursive=True)), *(p.pid for p in this.parents())}
        now = time.monotonic()
        elapsed = now - self.last_call
        cpu_times, count = {}, 0
        for process in psutil.process_iter(["pid", "cpu_times"]):
            pid, times = process.info["pid"], process.info["cpu_times"]
            if pid in own or times is None:
                continue
            cpu_times[pid] = times.user + times.system
            if pid in self.cpu_times and cpu_times[pid] - self.cpu_times[pid] >= BUSY * elapsed:
                count += 1
        self.cpu_times, self.last_call = cpu_times, now
        return count


def cpu_seconds() -> float:
    """User + system time of this process, of its children that have finished and of its descendants still running."""
    finished = sum(
        usage.ru_utime + usage.ru_stime
        for usage in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN))
    )
    running = 0.0
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):  # it may end between listing and reading
            times = process.cpu_times()
            running += times.user + times.system
    return finished + running


@contextmanager
def measuring(interval: float = 5.0, on_sample=None, sample_every: float = 60.0):
    """`with measuring() as measurement: ...` fills `measurement` (a Measurement) when the block ends. `on_sample`, if
    given, gets the measurement so far about every `sample_every` seconds while the block runs: what a step killed
    before its end (a session's end kills every process) still leaves behind."""
    measurement, others = Measurement(), OtherProcesses()
    stop = threading.Event()
    started, cpu_before = time.monotonic(), cpu_seconds()

    def update():
        measurement.seconds = time.monotonic() - started
        measurement.cpu_seconds = cpu_seconds() - cpu_before
        measurement.load_average = statistics.fmean(measurement.loads)

    def sample():
        measurement.loads.append(os.getloadavg()[0])
        last_sample = started
        while not stop.wait(interval):  # busy() needs a whole interval to tell a busy process from a brief one
            measurement.loads.append(os.getloadavg()[0])
            measurement.other_processes = max(measurement.other_processes, others.busy())
            if on_sample is not None and time.monotonic() - last_sample >= sample_every:
                update()
                on_sample(measurement)
                last_sample = time.monotonic()

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield measurement
    finally:
        stop.set()
        sampler.join()
        update()
