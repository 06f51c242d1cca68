"""ltr_bench: hyperparameter-sweep benchmarking for learning to rank.

DirectRanker (RankNet*) and the classic baselines, composed by Hydra, swept by Optuna,
trained through Lightning and tracked in MLflow.
"""

__version__ = "0.1.0"
