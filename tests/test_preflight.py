"""The run's memory and disk, estimated before any work (pipeline/preflight.py)."""

import pytest

from amp_pipeline.core.errors import InputError
from amp_pipeline.pipeline import preflight


@pytest.fixture
def csv(tmp_path):
    path = tmp_path / "big.csv"
    path.write_bytes(b"x" * (4 * 2**20))  # 4 MB
    return path


def test_a_run_that_fits_passes_quietly(csv, tmp_path):
    assert preflight.check(csv, tmp_path / "out", 1, free_disk_mb=1e6, available_mb=1e6) == []


def test_too_little_disk_is_refused_in_one_line_naming_the_output_flag(csv, tmp_path):
    with pytest.raises(InputError) as e:
        preflight.check(csv, tmp_path / "out", 1, free_disk_mb=10, available_mb=1e6)
    message = str(e.value)
    assert message.startswith(f"--output {tmp_path / 'out'}:") and "\n" not in message
    assert "cluster runner" in message


def test_too_little_memory_names_beam_workers_as_the_way_out(csv, tmp_path):
    one = preflight.estimate(csv.stat().st_size, 1).memory_mb
    with pytest.raises(InputError, match=r"^--beam-workers 4: .* use --beam-workers 1$"):
        preflight.check(csv, tmp_path, 4, free_disk_mb=1e6, available_mb=one + 1)
    with pytest.raises(InputError, match=r"^--beam-workers 1: .*cluster runner"):
        preflight.check(csv, tmp_path, 1, free_disk_mb=1e6, available_mb=one - 1)


def test_close_to_the_limit_warns(csv, tmp_path):
    need = preflight.estimate(csv.stat().st_size, 1)
    warnings = preflight.check(
        csv, tmp_path, 1, free_disk_mb=need.disk_mb / 0.9, available_mb=need.memory_mb / 0.9
    )
    assert len(warnings) == 2 and all("needs about" in w for w in warnings)


def test_the_disk_estimate_grows_with_the_input_and_memory_with_the_workers():
    small, large = preflight.estimate(10 * 2**20, 1), preflight.estimate(10 * 2**30, 1)
    assert small.disk_mb > 10 and large.disk_mb > 10 * 1024  # at least the input again
    assert large.memory_mb == small.memory_mb  # the driver no longer grows with the rows
    assert preflight.estimate(10 * 2**20, 3).memory_mb > small.memory_mb


def test_a_gzipped_input_counts_uncompressed(tmp_path):
    """The ratio is measured on the file's start: exact within the sample, close past it, and
    every member of a multi-member file (what `cat a.gz b.gz` makes) counted."""
    import gzip

    import numpy as np

    rng = np.random.default_rng(0)
    lines = "".join(f"{i},{rng.normal():.6f},{'ab'[i % 2]}\n" for i in range(60_000)).encode()
    path = tmp_path / "t.csv.gz"
    path.write_bytes(
        gzip.compress(lines[: len(lines) // 2]) + gzip.compress(lines[len(lines) // 2 :])
    )
    assert preflight.uncompressed_bytes(path) == len(lines)
    estimated = preflight.uncompressed_bytes(path, sample=64 * 1024)
    assert abs(estimated / len(lines) - 1) < 0.1
    assert preflight.input_bytes(tmp_path) == len(lines)


def test_the_embedded_run_and_a_streamed_split_s_shuffled_copy_are_counted(tmp_path):
    digits = tmp_path / "digits"
    digits.mkdir()
    (digits / "digits.csv").write_bytes(b"x" * 300_000)
    with pytest.raises(InputError, match=r"needs about 201 MB of disk .* and 9 MB is free"):
        preflight.check(digits, tmp_path / "out", 1, free_disk_mb=9, available_mb=1e6)
    plain = preflight.estimate(2**30, 1).disk_mb
    assert preflight.estimate(2**30, 1, train_bytes=100 * 2**20).disk_mb == plain  # in memory
    assert preflight.estimate(2**30, 1, train_bytes=2**30).disk_mb == plain + 1024


def test_a_full_disk_is_one_line_naming_the_device_the_path_and_the_need(tmp_path):
    import errno

    full = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "a" / "b.gz"))
    try:
        try:
            raise full
        except OSError as e:
            raise RuntimeError("Transform failed") from e
    except RuntimeError as wrapped:
        error = preflight.disk_full(wrapped, tmp_path, None, 1)
    message = str(error)
    assert message.startswith("no space left on ") and "\n" not in message
    assert f"writing {tmp_path / 'a' / 'b.gz'}: " in message
    assert message.endswith("MB free, this run needs about 200 MB")
    # A child's last line, or ML Metadata's SQLite store, says it in words.
    sqlite = RuntimeError("Error when executing query: database or disk is full query: UPDATE")
    assert f"writing {tmp_path}:" in str(preflight.disk_full(sqlite, tmp_path, None, 1))
    assert preflight.disk_full(RuntimeError("no such file"), tmp_path, None, 1) is None
