"""The private Optuna and Hydra names of ltr_bench.sweeper.optuna_private and hydra_private still
exist and behave.

A failure here names the attribute a new release removed or changed; fix the helper of that
name in its module (or drop it for a public API), nothing else in the sweeper reads them.
"""

from __future__ import annotations

import optuna
import pytest
from hydra.core.utils import JobReturn, JobStatus

from ltr_bench.sweeper import hydra_private as hp
from ltr_bench.sweeper import optuna_private as op
from tests.private_names import assert_still_there


@pytest.mark.parametrize(("owner", "attr"), [*op.PRIVATE_NAMES, *hp.PRIVATE_NAMES])
def test_each_private_name_is_still_there(owner: str, attr: str) -> None:
    if attr in ("_trial_id", "_storage", "_return_value"):
        return  # instance attributes: checked on live objects below
    assert_still_there(owner, attr)


def test_trial_ids_and_storage_match_the_storage(tmp_path) -> None:
    rdb = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 's.db'}", heartbeat_interval=60)
    study = optuna.create_study(storage=rdb, study_name="s")
    trial = study.ask()
    study_id = rdb.get_study_id_from_name("s")
    expected = rdb.get_trial_id_from_study_id_trial_number(study_id, trial.number)
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
    assert hp.job_error(ret) is error, "hydra JobReturn._return_value changed"
    ok = JobReturn(status=JobStatus.COMPLETED, _return_value=0.5)
    assert hp.job_error(ok) == ok.return_value == 0.5, "hydra JobReturn._return_value changed"


def test_escape_special_characters() -> None:
    assert hp.escape_special_characters("a,b") == "a\\,b", "hydra escape_special_characters"


def test_earlier_trials_hides_the_later_trials_from_every_trial_list() -> None:
    study = optuna.create_study()
    for _ in range(3):
        study.tell(study.ask(), 0.0)
    view = op.earlier_trials(study, 2)
    assert [t.number for t in view.get_trials(deepcopy=False)] == [0, 1], "Study._get_trials"
    assert [t.number for t in view.trials] == [0, 1], "Study.trials no longer reads _get_trials"
    assert len(study.trials) == 3  # the study itself is untouched
