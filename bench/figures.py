"""What every bench script prints the same way: times, stage lines, verdicts against targets, and the
machine yardstick that says whether two runs are comparable at all."""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def status(stage: str) -> None:
    """One line on stderr, so a slow stage never looks like a hang and stdout stays just figures."""
    print(f"» {stage}", file=sys.stderr, flush=True)


@dataclass(frozen=True, slots=True)
class Verdict:
    name: str
    met: bool
    detail: str


@dataclass(slots=True)
class Report:
    """Prints figures to stdout as they are measured and keeps each target's verdict for the summary.

    `noun` is what the script calls what it judges against ("target", "goal").
    """

    noun: str = "target"
    verdicts: list[Verdict] = field(default_factory=list)

    def line(self, text: str = "") -> None:
        print(text, flush=True)

    def judge(
        self, name: str, figures: str, target: str, met: bool, *, key: str | None = None, miss: str = "MISSED"
    ) -> None:
        """One figure line with its target and verdict; `key` is the part of `figures` the target judges."""
        verdict = "met" if met else miss
        self.line(f"{name:<27}{figures}  ({self.noun} {target}: {verdict})")
        self.verdicts.append(Verdict(name, met, f"{key or figures} vs {self.noun} {target} ({verdict})"))

    def summary(self) -> None:
        if not self.verdicts:
            return
        met = sum(v.met for v in self.verdicts)
        self.line()
        self.line(f"summary: {met} of {len(self.verdicts)} {self.noun}s met")
        for v in self.verdicts:
            self.line(f"  {'met   ' if v.met else 'MISSED'}  {v.name}: {v.detail}")


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values: an observed value, never an interpolation."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def yardstick() -> float:
    """Seconds for one unit of fixed, signoff-independent work (JSON, SHA-256, dicts), best of five rounds.

    A shared or virtual machine's speed drifts (on the 2-core VM this was written on, by up to 1.7x within
    minutes); printing this at the start and end of a run says whether two runs are comparable at all.
    """
    payload = {"amount": 50, "currency": "USD", "recipient": "Hanako", "tags": ["a", "b"]}
    best = math.inf
    for _ in range(5):
        start = time.perf_counter()
        for i in range(2000):
            body = json.dumps({**payload, "seq": i}, sort_keys=True, separators=(",", ":"))
            hashlib.sha256(body.encode()).hexdigest()
        best = min(best, (time.perf_counter() - start) / 2000)
    return best


def machine_busy_seconds() -> float:
    """CPU seconds every process on the machine has used (all CPUs, not idle or iowait), from /proc/stat.

    The run's own processes are subtracted from it to show how much else ran meanwhile: on a shared VM
    another job can take a core and halve a figure, and a row should say so rather than hide it.
    """
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return math.nan
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")
