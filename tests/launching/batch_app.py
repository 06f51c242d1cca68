"""A Hydra app without a config of its own, for batches of Hydra's basic sweeper (run as ``python
batch_app.py --multirun +calls_file=... +x=0,1,2``): each job appends its ``x`` and process to
``calls_file`` and returns ``x``; ``+fail_x`` makes that job raise."""

from __future__ import annotations

import json
import os

import hydra
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path=None)
def main(cfg: DictConfig) -> int:
    with open(cfg.calls_file, "a") as f:
        f.write(json.dumps({"x": cfg.x, "pid": os.getpid()}) + "\n")
    if cfg.x == cfg.get("fail_x"):
        raise RuntimeError(f"batch failure for x={cfg.x}")
    return int(cfg.x)


if __name__ == "__main__":
    main()
