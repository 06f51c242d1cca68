"""The leaderboard's progress line: per model and fold, how much is done and when the rest may be
done, estimated from the parts timed so far (their bundles' wall times, this run's or an earlier
one's), so a resumed run estimates from the parts it found."""

from __future__ import annotations

from dataclasses import dataclass, field


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


@dataclass
class Eta:
    """Model-folds done and left, and the seconds per model-fold of the parts that were timed."""

    total: int  # model-folds of the whole plan
    done: int = 0
    timed: list[tuple[int, float]] = field(default_factory=list)  # (model-folds, wall seconds)

    def finished(self, model_folds: int, wall_s: float | None) -> None:
        """A part of ``model_folds`` finished (or was found), ``wall_s`` its measured time."""
        self.done += model_folds
        if wall_s is not None and wall_s > 0 and model_folds > 0:
            self.timed.append((model_folds, float(wall_s)))

    def per_model_fold(self) -> float | None:
        """Seconds per model and fold of the timed parts, None before the first."""
        n = sum(k for k, _ in self.timed)
        return sum(s for _, s in self.timed) / n if n else None

    def line(self, number: int, parts: int, labels: str, folds: int) -> str:
        """``[3/17] ranksvm (5 folds): 10 of 85 model-folds done; ~0.4 min per model and fold,
        this model ~2.0 min, all ~30 min left``."""
        head = f"[{number}/{parts}] {labels} ({folds} folds): {self.done} of {self.total} "
        head += "model-folds done"
        rate = self.per_model_fold()
        if rate is None:
            return head + "; ETA after the first part is timed"
        n_models = labels.count(",") + 1
        left = max(self.total - self.done, 0)
        return (
            f"{head}; ~{_minutes(rate)} per model and fold, this part ~"
            f"{_minutes(rate * folds * n_models)}, all ~{_minutes(rate * left)} left"
        )
