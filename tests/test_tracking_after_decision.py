"""A tracking failure after the gate decided and the Pusher published does not make the run
"failed": its status and exit code stay those of the decision the serving folder reflects."""

import json

import pytest

from amp_pipeline.pipeline.local_runner import track_after_decision


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
    from amp_pipeline.pipeline.signals import Interrupted

    def track():
        raise Interrupted(15)

    with pytest.raises(Interrupted):
        track_after_decision(track, BrokenTracker(), {"status": "promoted"}, tmp_path)


class RacingRegistry:
    """A registry whose alias insert collides with another run's `collisions` times, as MLflow's
    server answered two concurrent promotions (read, then insert)."""

    def __init__(self, collisions: int, message: str = ""):
        self.collisions, self.message, self.aliases = collisions, message, {}

    def set_registered_model_alias(self, name, alias, version):
        from mlflow.exceptions import MlflowException

        if self.collisions:
            self.collisions -= 1
            raise MlflowException(
                self.message
                or "(sqlite3.IntegrityError) UNIQUE constraint failed: "
                "registered_model_aliases.workspace, registered_model_aliases.name, "
                "registered_model_aliases.alias"
            )
        self.aliases[(name, alias)] = version


def test_a_champion_alias_set_concurrently_is_set_again_and_other_errors_stand(monkeypatch):
    from mlflow.exceptions import MlflowException

    from amp_pipeline.pipeline.tracking import tracker as tracking

    monkeypatch.setattr(tracking.time, "sleep", lambda s: None)
    registry = RacingRegistry(collisions=2)
    tracking.set_alias(registry, "digits", "champion", "7")
    assert registry.aliases == {("digits", "champion"): "7"}
    with pytest.raises(MlflowException, match="UNIQUE constraint"):
        tracking.set_alias(RacingRegistry(collisions=tracking.ALIAS_ATTEMPTS), "d", "c", "1")
    with pytest.raises(MlflowException, match="permission denied"):
        tracking.set_alias(RacingRegistry(1, "permission denied"), "d", "c", "1")
