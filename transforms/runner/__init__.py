"""Running a job: the local runner, its progress lines, the job's counters."""
