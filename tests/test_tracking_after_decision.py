"""A tracking failure after the gate decided and the Pusher published does not make the run
"failed": its status and exit code stay those of the decision the serving folder reflects."""

import json

import pytest

from pipeline.local_runner import track_after_decision


class BrokenTracker:
    tracking_uri, experiment, run_id = "http://127.0.0.1:1", "amp-pipeline", "abc"

    def __init__(self):
        self.failed = None

    def fail(self, reason):
        self.failed = reason
        raise ConnectionError("the tracking server is gone")


def test_the_decision_and_the_push_stand_when_mlflow_fails_after_them(tmp_path):
    result = {
        "status": "promoted",
        "exit_code": 0,
        "exports": {"saved_model": str(tmp_path / "serving/digits/1700000000")},
        "warnings": [],
    }
    tracker = BrokenTracker()

    def track():
        raise ConnectionError("HTTPConnectionPool(host='127.0.0.1'): Max retries exceeded")

    track_after_decision(track, tracker, result, tmp_path)
    written = json.loads((tmp_path / "run_summary.json").read_text())
    assert written["status"] == "promoted" and written["exit_code"] == 0
    assert written["mlflow"]["error"].startswith("ConnectionError: HTTPConnectionPool")
    assert written["mlflow"]["run_id"] == "abc"
    assert "the push stands: " in written["warnings"][0]
    assert tracker.failed.startswith("tracking after the decision: ConnectionError")


def test_an_interrupt_during_tracking_is_not_swallowed(tmp_path):
    from pipeline.signals import Interrupted

    def track():
        raise Interrupted(15)

    with pytest.raises(Interrupted):
        track_after_decision(track, BrokenTracker(), {"status": "promoted"}, tmp_path)
