"""The private Optuna and Hydra names of ltr_bench.sweeper.optuna_private still exist and behave.

A failure here names the attribute a new release removed or changed; fix the helper of that
name in optuna_private (or drop it for a public API), nothing else in the sweeper reads them.
"""

from __future__ import annotations

import optuna
import pytest
from hydra.core.utils import JobReturn, JobStatus

from ltr_bench.sweeper import optuna_private as op
from tests.private_names import assert_still_there


@pytest.mark.parametrize(("owner", "attr"), op.PRIVATE_NAMES)
def test_each_private_name_is_still_there(owner: str, attr: str) -> None:
    if attr in ("_trial_id", "_storage", "_study_id", "_return_value"):
        return  # instance attributes: checked on live objects below
    assert_still_there(owner, attr)


def test_trial_and_study_ids_and_storage_match_the_storage(tmp_path) -> None:
    rdb = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 's.db'}", heartbeat_interval=60)
    study = optuna.create_study(storage=rdb, study_name="s")
    trial = study.ask()
    assert op.study_id(study) == rdb.get_study_id_from_name("s"), "optuna.Study._study_id changed"
    expected = rdb.get_trial_id_from_study_id_trial_number(op.study_id(study), trial.number)
    assert op.trial_id(trial) == expected, "optuna.trial.Trial._trial_id changed"
    frozen = study.get_trials(deepcopy=False)[trial.number]
    assert op.trial_id(frozen) == expected, "optuna.trial.FrozenTrial._trial_id changed"
    storage = op.study_storage(study)
    assert storage.get_trial(expected).number == trial.number, "optuna.Study._storage changed"
    assert isinstance(op.stale_trial_ids(rdb, study), set), "RDBStorage._get_stale_trial_ids"


def test_distribution_contains() -> None:
    d = optuna.distributions.IntDistribution(1, 9, step=2)
    assert op.distribution_contains(d, 3.0), "BaseDistribution._contains changed"
    assert not op.distribution_contains(d, 4.0), "BaseDistribution._contains changed"


def test_job_error_is_the_failed_jobs_exception() -> None:
    error = ValueError("boom")
    ret = JobReturn(status=JobStatus.FAILED, _return_value=error)
    assert op.job_error(ret) is error, "hydra JobReturn._return_value changed"
    ok = JobReturn(status=JobStatus.COMPLETED, _return_value=0.5)
    assert op.job_error(ok) == ok.return_value == 0.5, "hydra JobReturn._return_value changed"


def test_escape_special_characters() -> None:
    assert op.escape_special_characters("a,b") == "a\\,b", "hydra escape_special_characters"


def test_the_schema_head_is_looked_up_once_and_a_stale_schema_still_fails(tmp_path) -> None:
    from optuna.storages._rdb.storage import _VersionManager

    from ltr_bench.sweeper.storage import open_storage

    url = f"sqlite:///{tmp_path / 's.db'}"
    open_storage(url, None, None)
    assert getattr(_VersionManager.get_head_version, "remembered", False)
    rdb = open_storage(url, None, None)
    head = rdb._version_manager.get_head_version()
    assert head == rdb._version_manager.get_current_version(), "the database is at the head"
    assert rdb._version_manager._create_alembic_script().get_current_head() == head
    # the database's own revision is still read on every open: an old schema is refused
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    with engine.begin() as connection:
        connection.execute(sqlalchemy.text("UPDATE alembic_version SET version_num = 'v3.0.0.a'"))
    engine.dispose()
    with pytest.raises(RuntimeError, match="no longer compatible"):
        optuna.storages.RDBStorage(url)


def test_earlier_trials_hides_the_later_trials_from_every_trial_list() -> None:
    study = optuna.create_study()
    for _ in range(3):
        study.tell(study.ask(), 0.0)
    view = op.earlier_trials(study, 2)
    assert [t.number for t in view.get_trials(deepcopy=False)] == [0, 1], "Study._get_trials"
    assert [t.number for t in view.trials] == [0, 1], "Study.trials no longer reads _get_trials"
    assert len(study.trials) == 3  # the study itself is untouched
