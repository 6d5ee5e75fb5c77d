"""The measurement code sees what it claims to see."""

import numpy as np

from amp_pipeline.components.amp.perf import PeakMemory, StepTimer


def test_cpu_peak_memory_sees_an_allocation_inside_the_section_only():
    before = np.ones(40_000_000)  # 305 MiB allocated before the section: must not count
    del before
    memory = PeakMemory("cpu")
    memory.start()
    inside = np.ones(20_000_000)  # 153 MiB inside the section
    inside[::4096] = 2.0
    del inside
    peak = memory.peak_mb()
    assert 140 < peak < 260, peak
    assert "CPU" in memory.method


def test_step_timer_excludes_warmup_steps():
    timer = StepTimer(batch_size=8, warmup_steps=2)
    for step in range(6):
        timer.on_train_batch_begin(step)
        if step < 2:
            np.linalg.inv(np.eye(300) + 1)  # slow "compilation" steps
        timer.on_train_batch_end(step)
    summary = timer.summary()
    assert summary["measured_steps"] == 4 and summary["warmup_steps"] == 2
    assert summary["step_time_ms"]["p50"] <= summary["step_time_ms"]["p90"]
    assert summary["examples_per_sec"] > 0
