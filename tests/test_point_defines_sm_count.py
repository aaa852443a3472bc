"""cuda.point_defines that choose a build by the SM count, and a rule that refines a define of its own
name (stage 15's BN 0: the tile width by waves; tests/test_hopper_fp8_block.py has the stage's own rule):

- ``sm_count`` in the rules is the device config's (device.sm_count, conf/device/h200.yaml: 132), in
  every process of a run alike, never read from a GPU before the run has claimed one; a device config
  without it reads the GPU, and without a GPU says to set it;
- a rule named after a define replaces its value only if it reads it (one -D flag, the kernel name,
  the row's defines); any other name already taken is still an error;
- the point key changes with the SM count only for variants whose rules read it;
- analysis counts any value such a define was built with as the YAML's current configuration.
"""
from __future__ import annotations

import dataclasses

import logging
from pathlib import Path

import pandas as pd
import pytest
from conftest import compose_cfg

from gemmlab.backends.cuda_kernels import build_for
from gemmlab.points import ConfigError, expand

WS = ["variant=wgmma_ws", "precision=bf16", "layouts=[nt]", "sizes.square=[]", "sizes.shapes=[[1024,2048,4096]]"]


def _ws(rules, extra=()):
    """Stage 12's point at 1024 x 2048 x 4096 with ``rules`` added to its point_defines."""
    from omegaconf import open_dict

    cfg = compose_cfg([*WS, *extra])
    with open_dict(cfg):
        cfg.variant.wgmma_ws.cuda.point_defines.update(rules)
    (p,) = expand(cfg)
    return p


def test_the_rules_read_the_device_configs_sm_count():
    cfg = compose_cfg(WS)
    assert cfg.device.sm_count == 132  # conf/device/h200.yaml (the default device)
    p = _ws({"GROUPS": "sm_count // 4"})
    assert p.sm_count == 132 and p.point_defines()["GROUPS"] == 33
    assert _ws({"GROUPS": "sm_count // 4"}, ["device.sm_count=114"]).point_defines()["GROUPS"] == 28
    # every rule sees it (the grids, in launch_shape, size by the GPU's own count)
    assert p.expr_env()["sm_count"] == 132


def test_without_the_count_in_the_config_the_rules_read_the_gpu_or_say_what_to_set(monkeypatch):
    from gemmlab.gpu import device

    monkeypatch.setattr(device, "no_device_reason", lambda: "no CUDA device (test)")
    with pytest.raises(ConfigError, match=r"set device\.sm_count"):  # at expand: before any work
        _ws({"GROUPS": "sm_count // 4"}, ["device.sm_count=null"])
    monkeypatch.setattr(device, "no_device_reason", lambda: None)
    monkeypatch.setattr(device, "info", lambda: {"sm_count": 78})
    p = _ws({"GROUPS": "sm_count // 4"}, ["device.sm_count=null"])
    assert p.sm_count is None and p.point_defines()["GROUPS"] == 19
    # rules that never read it never ask
    monkeypatch.setattr(device, "no_device_reason", lambda: pytest.fail("read the GPU"))
    assert _ws({}, ["device.sm_count=null"]).point_defines() == {"B_KMAJOR": 1}


def test_the_key_follows_the_sm_count_only_where_the_rules_read_it():
    plain = [_ws({}, [f"device.sm_count={n}"]).key for n in (132, 114)]
    assert plain[0] == plain[1] == _ws({}).key
    chosen = [_ws({"GROUPS": "sm_count // 4"}, [f"device.sm_count={n}"]).key for n in (132, 114)]
    assert chosen[0] != chosen[1]


def test_a_rule_that_reads_its_define_refines_it_once_everywhere():
    from gemmlab.runner import variant_fields

    rule = {"GRID_CTAS": "GRID_CTAS if GRID_CTAS > 0 else sm_count - sm_count % CLUSTER_M"}
    p = _ws(rule, ["variant.wgmma_ws.cuda.defines={GRID_CTAS:0}"])
    assert p.point_defines() == {"B_KMAJOR": 1, "GRID_CTAS": 132}
    b = build_for(p)
    assert [f for f in b.flags if f.startswith("-DGRID_CTAS")] == ["-DGRID_CTAS=132"]
    assert dict(b.yaml_defines)["GRID_CTAS"] == 0 and dict(b.defines)["GRID_CTAS"] == 132
    assert "GRID_CTAS=132" in b.kernel_name and "GRID_CTAS=0" not in b.kernel_name
    names = [k for k, _ in b.defines]
    assert len(names) == len(set(names))
    assert variant_fields(p)["defines"]["GRID_CTAS"] == 132
    # the launch rules see the refined value
    assert p.expr_env()["GRID_CTAS"] == 132
    # an explicit value is the rule's to keep
    kept = _ws(rule, ["variant.wgmma_ws.cuda.defines={GRID_CTAS:64}"])
    assert kept.point_defines()["GRID_CTAS"] == 64 and "-DGRID_CTAS=64" in build_for(kept).flags


def test_a_rule_named_after_a_define_it_does_not_read_would_hide_it():
    with pytest.raises(ConfigError, match="would hide the name 'GRID_CTAS'"):
        _ws({"GRID_CTAS": "sm_count"}).point_defines()
    with pytest.raises(ConfigError, match="would hide the name 'm'"):
        _ws({"m": "m + 1"}).point_defines()
    with pytest.raises(ConfigError, match="would hide the name 'sm_count'"):
        _ws({"sm_count": "sm_count + 1"}).point_defines()


def test_validate_refuses_a_count_below_one():
    from gemmlab import validate

    probs = validate.problems(compose_cfg(["device.sm_count=0"]))
    assert any(pr.path == "device.sm_count" for pr in probs), probs
    assert not validate.problems(compose_cfg(["device.sm_count=null"]))


def test_the_launch_records_the_count_the_build_was_chosen_for(monkeypatch, caplog):
    from gemmlab.backends import cuda_kernels

    p = _ws({"GROUPS": "sm_count // 4"})
    monkeypatch.setattr(cuda_kernels, "gpu_sm_count", lambda variant: 132)
    assert cuda_kernels._rules_sm_count(p) == 132 and not caplog.records
    monkeypatch.setattr(cuda_kernels, "gpu_sm_count", lambda variant: 114)
    with caplog.at_level(logging.WARNING, logger="gemmlab"):
        assert cuda_kernels._rules_sm_count(p) == 132
    assert "device.sm_count=114" in caplog.text
    assert cuda_kernels._rules_sm_count(_ws({})) is None  # nothing chosen by it: nothing recorded


def test_analysis_takes_any_built_value_of_a_define_chosen_per_point(monkeypatch):
    from analysis import ladder
    from gemmlab import variants
    from gemmlab.variants import VariantInfo

    assert variants.info("wgmma_ws").per_point == ()  # its point define B_KMAJOR is no define
    info = VariantInfo(name="k", backend="cuda", stage=15, description="", tags=(), in_default_sweep=False,
                       path=Path("k.yaml"), defines_items=(("BN", "0"), ("STAGES", "5")),
                       per_point=("BN",))
    rows = pd.DataFrame({"defines": ['{"BN": 64, "STAGES": 5}', '{"BN": 128, "STAGES": 5}', '{"BN": 128, "STAGES": 4}']})
    monkeypatch.setattr(ladder.variants, "info", lambda name, *a, **k: info)
    assert list(ladder.current_configuration(rows, "k")) == [True, True, False]
    # with the rule the YAML gives and the rows' points, a built value must be the rule's there (a candidate's
    # override of a per-point define is not the defaults); a row the rule cannot be read at (no SM count) agrees
    info = dataclasses.replace(info, point_rules_items=(("BN", "BN if BN > 0 else (64 if n * 4 <= sm_count else 128)"),))
    rows = rows.assign(m=[128, 128, 128, 128][:3], n=[32, 32, 4096], k=4096, sm_count=[132, 132, None])
    assert list(ladder.current_configuration(rows, "k")) == [True, False, False]
    rows = rows.assign(defines=['{"BN": 64, "STAGES": 5}', '{"BN": 128, "STAGES": 5}', '{"BN": 64, "STAGES": 5}'])
    assert list(ladder.current_configuration(rows, "k")) == [True, False, True]
    assert list(ladder.current_configuration(rows, "k", {"BN": 128})) == [False, True, False]
