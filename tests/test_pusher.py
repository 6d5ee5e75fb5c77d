"""Publishing a model: all at once under a fresh version number, or not at all."""

import shutil

import pytest

from amp_pipeline.serving.pusher import PARTIAL_PREFIX, clean_partial_pushes, publish, versions
from amp_pipeline.serving.repository import version_dirs


def _model(path):
    (path / "variables").mkdir(parents=True)
    (path / "saved_model.pb").write_bytes(b"graph")
    (path / "variables" / "variables.index").write_bytes(b"weights")
    return path


def test_a_push_appears_whole_under_a_new_version_and_leaves_nothing_else(tmp_path):
    source = _model(tmp_path / "model")
    base = tmp_path / "serving" / "digits"
    target = publish(source, base, now=1_000)
    assert target == base / "1000"
    assert (target / "variables" / "variables.index").read_bytes() == b"weights"
    assert sorted(p.name for p in base.iterdir()) == ["1000"]


def test_two_pushes_in_the_same_second_get_distinct_versions(tmp_path):
    source = _model(tmp_path / "model")
    base = tmp_path / "serving" / "digits"
    first = publish(source, base, now=1_000)
    second = publish(source, base, now=1_000)
    assert (first.name, second.name) == ("1000", "1001")
    # An older clock never goes below the newest version either.
    assert publish(source, base, now=5).name == "1002"
    assert versions(base) == [1000, 1001, 1002]


def test_a_push_that_dies_mid_copy_leaves_no_version_and_is_cleaned_up(tmp_path, monkeypatch):
    source = _model(tmp_path / "model")
    base = tmp_path / "serving" / "digits"
    publish(source, base, now=1_000)

    def dying_copy(src, dst, **kwargs):
        (dst / "variables").mkdir(parents=True)
        (dst / "saved_model.pb").write_bytes(b"half")
        raise OSError("No space left on device")

    monkeypatch.setattr(shutil, "copytree", dying_copy)
    with pytest.raises(OSError):
        publish(source, base, now=2_000)
    monkeypatch.undo()
    partial = [p for p in base.iterdir() if p.name.startswith(PARTIAL_PREFIX)]
    assert len(partial) == 1 and versions(base) == [1000]
    # What TF Serving and the local server see: only the complete version.
    assert sorted(version_dirs(base)) == [1000]
    assert clean_partial_pushes(tmp_path / "serving") == partial
    assert sorted(p.name for p in base.iterdir()) == ["1000"]


def test_a_failed_rename_names_its_errno_and_leaves_nothing_behind(tmp_path, monkeypatch):
    import errno
    import os

    source = tmp_path / "model"
    source.mkdir()
    (source / "saved_model.pb").write_bytes(b"x")
    base = tmp_path / "serving" / "digits"

    def read_only(src, dst):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "rename", read_only)
    with pytest.raises(OSError, match="Read-only file system") as caught:
        publish(source, base, now=100)
    assert caught.value.errno == errno.EROFS
    assert "no free version" not in str(caught.value)
    assert list(base.iterdir()) == []  # no version, no staging folder
