"""Job values, idempotency keys and backoff: the pure parts, byte-compatible with the C++ client
(client/src/job.cc), so C++ and Python workers share one queue and one database."""
import dataclasses
import random

STAGES_PREFIX = "stages="
MAX_STAGES = 64
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK64 = (1 << 64) - 1


class BadJob(ValueError):
    """A job value that does not start with a valid `stages=a,b,...` line."""


@dataclasses.dataclass(frozen=True)
class JobSpec:
    id: str
    payload: bytes  # the whole value, stage line included (the idempotency key covers it)
    stages: tuple

    @property
    def poison(self):
        return b"\npoison" in self.payload


def parse_job(job_id, value):
    """The job under `<prefix>jobs/<job_id>`: first line `stages=a,b,c`, then a free payload."""
    first = value.split(b"\n", 1)[0].decode("utf-8", errors="replace")
    if not first.startswith(STAGES_PREFIX):
        raise BadJob(f"job {job_id}: value must start with 'stages=a,b,...'")
    stages = tuple(first[len(STAGES_PREFIX):].split(","))
    if any(not s for s in stages):
        raise BadJob(f"job {job_id}: empty stage name")
    if len(stages) > MAX_STAGES:
        raise BadJob(f"job {job_id}: more than {MAX_STAGES} stages")
    return JobSpec(job_id, value, stages)


def _fnv1a(h, data):
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK64
    return h


def idempotency_key(job, stage):
    """FNV-1a 64 of job id, NUL, payload, NUL, decimal stage: the C++ IdempotencyKey."""
    h = _fnv1a(_FNV_OFFSET, job.id.encode())
    h = _fnv1a(h, b"\0")
    h = _fnv1a(h, job.payload)
    h = _fnv1a(h, b"\0")
    h = _fnv1a(h, str(stage).encode())
    return f"{h:016x}"


class Backoff:
    """Exponential backoff with full jitter: delay = uniform(0, min(cap, base * 2**attempt)).

    Full jitter spreads workers that failed together (a leader kill fails them all at once) over
    the whole window instead of around its middle. Seeded, so a run can be repeated."""

    def __init__(self, base_s=0.1, cap_s=2.0, seed=None):
        self.base_s = base_s
        self.cap_s = cap_s
        self.attempt = 0
        self._rng = random.Random(seed)

    def ceiling(self):
        return min(self.cap_s, self.base_s * (2 ** min(self.attempt, 32)))

    def next_delay(self):
        delay = self._rng.uniform(0.0, self.ceiling())
        self.attempt += 1
        return delay

    def reset(self):
        self.attempt = 0
