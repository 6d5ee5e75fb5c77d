"""The run's memory and disk, estimated before any work (pipeline/preflight.py)."""

import pytest

from core.errors import InputError
from pipeline import preflight


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
