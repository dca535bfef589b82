"""A --sample_fn that kills its own job midway, the way a preempted machine or
the kernel's OOM killer stops one: SIGKILL, no clean-up, when the job has seen
$DATAGEN_KILL_AFTER samples (unset: it passes every sample through)."""

import os
import signal

_seen = 0


def die_midway(sample):
    global _seen
    _seen += 1
    if str(_seen) == os.environ.get("DATAGEN_KILL_AFTER"):
        os.kill(os.getpid(), signal.SIGKILL)
    return sample
