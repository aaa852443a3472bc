"""gemmlab: measure GEMM variants x precisions x sizes, one result row per point.

    python run.py                                   # default variants, precisions and sizes
    python run.py variant=[cublas,naive] precision=fp16 sizes=square
    python run.py -m precision=fp32,fp64 sizes=smoke   # a sweep: rows merged into one file
    python run.py +experiment=claims_ladder         # claims of the chapter (experiments/)
"""
import sys

import hydra
from omegaconf import DictConfig

from gemmlab import validate
from gemmlab.config import register_configs

register_configs()
INTERRUPTED = 130  # gemmlab.runner.main's exit code after a Ctrl-C


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    try:
        validate.check(cfg)  # ranges, and keys added with `+`, before any point is measured
    except validate.SettingError as e:
        _usage_error(str(e))
    from gemmlab.points import ConfigError
    from gemmlab.runner import main as run_points

    try:
        code = run_points(cfg)
    except ConfigError as e:  # a size, shape or variant setting no point can be made of: before any work
        _usage_error(str(e))
    multirun = HydraConfig.get().mode == RunMode.MULTIRUN
    # the run's page; a sweep's is written once all its jobs have ended; none after a Ctrl-C
    if cfg.run.report and not multirun and code != INTERRUPTED:
        from gemmlab.report import write_report

        write_report(HydraConfig.get().runtime.output_dir)
    # In a sweep, every job runs; the merge callback sets the exit code once all have ended.
    if code and not multirun:
        sys.exit(code)


def _usage_error(line: str) -> None:
    """One line on stderr, no traceback, exit code 2."""
    print(f"gemmlab: {line}", file=sys.stderr, flush=True)
    sys.exit(validate.EXIT_CODE)


if __name__ == "__main__":
    # What Hydra would reject without naming what is valid (an option its grammar cannot read,
    # an enum value, a misspelt key), in one line, before Hydra parses the command line.
    problem = validate.argv_problem(sys.argv[1:])
    if problem:
        _usage_error(problem)
    main()
