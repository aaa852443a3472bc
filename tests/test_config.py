"""Every config group option and every experiment composes; bad configs fail at compose time."""
from __future__ import annotations

import pytest
from conftest import ROOT, compose_cfg
from hydra.errors import ConfigCompositionException, MissingConfigException
from omegaconf import OmegaConf

from gemmlab.config import CONF_DIR, load_variant
from gemmlab.variants import files as variant_files
from gemmlab.points import ConfigError, expand, shapes

GROUPS = ["variant", "precision", "sizes", "measure", "device", "paths"]


def options(group):
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


EXPERIMENTS = sorted(p.stem for p in (ROOT / "experiments").glob("*.yaml"))


def test_root_config_composes_with_defaults():
    cfg = compose_cfg()
    assert set(cfg.precision) == {"fp64", "fp32", "tf32", "fp16", "bf16"}
    assert "cpu_blas" in cfg.variant and "cublas" in cfg.variant
    assert cfg.sizes.square and cfg.measure.cache.value == "flush"


@pytest.mark.slow
@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_group_option_composes(group, option):
    cfg = compose_cfg([f"{group}={option}"])
    if group in ("variant", "precision"):
        assert option in cfg[group]
    else:
        assert cfg[group] is not None


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_composes(name):
    cfg = compose_cfg([f"+experiment={name}"])
    assert cfg.experiment.name == name
    assert expand(cfg), "an experiment must select at least one point"


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_an_experiment_that_sets_a_variants_requires_keeps_the_variants_own_rules(name):
    """Hydra replaces a list: an experiment giving a variant more `requires` (decode.yaml's cuBLASLt)
    restates the variant file's rules, and must keep every one of them (a library limit left out would
    send the library shapes it refuses)."""
    cfg = compose_cfg([f"+experiment={name}"])
    for v, vc in cfg.variant.items():
        own = [r["expr"] for r in OmegaConf.load(variant_files()[v]).get("requires", [])]
        assert set(own) <= {r.expr for r in vc.requires}, (name, v)


def test_variant_sets_default_and_all_are_computed_from_the_folder():
    all_cfg = compose_cfg(["variant=all"])
    assert set(all_cfg.variant) == set(variant_files())
    default = compose_cfg()
    for name in variant_files():
        assert (name in default.variant) == bool(OmegaConf.load(variant_files()[name]).get("in_default_sweep", True))
    assert not {"default", "all"} & set(variant_files()), "variant files must not shadow the computed sets"


@pytest.mark.parametrize("name", sorted(variant_files()))
def test_every_variant_file_declares_its_own_package_and_known_precisions(name):
    text = variant_files()[name].read_text()
    assert text.startswith(f"# @package variant.{name}\n"), "first line must be '# @package variant.<file name>'"
    v = load_variant(name)
    assert set(v.precisions) <= set(options("precision")), v.precisions


def test_every_ceiling_names_a_probe_of_each_precision_of_its_stage():
    """A stage's ``ceiling`` (analysis reads it: the ladder's instruction ceiling) names a probe
    variant that runs every precision the stage runs; a misspelt name would only show as a gap."""
    named = {n: load_variant(n).ceiling for n in variant_files() if load_variant(n).ceiling}
    assert named, "no stage names a ceiling probe (stage 10 names mma_sync_peak)"
    for name, probe in named.items():
        assert probe in variant_files(), (name, probe)
        p = load_variant(probe)
        assert p.probe is not None and set(load_variant(name).precisions) <= set(p.precisions), (name, probe)


def test_misspelt_key_in_an_override_fails_naming_the_key():
    with pytest.raises(ConfigCompositionException) as e:
        compose_cfg(["measure.warmup=1"])
    assert "warmup" in str(e.value) or "warmup" in str(e.value.__cause__)


def test_misspelt_key_in_a_variant_file_fails_at_compose(tmp_path, monkeypatch):
    bad = tmp_path / "conf"
    import shutil

    shutil.copytree(CONF_DIR, bad, symlinks=True)
    (bad / "variant" / "cpu_blas.yaml").write_text(
        "# @package variant.cpu_blas\nbackend: cpu_blas\nprecisons: [fp32]\n")
    monkeypatch.setattr("gemmlab.config.CONF_DIR", bad)
    with pytest.raises(Exception) as e:
        compose_cfg(["variant=cpu_blas"])
    assert "precisons" in str(e.value)


def test_unknown_variant_fails_listing_the_valid_choices():
    with pytest.raises(MissingConfigException) as e:
        compose_cfg(["variant=naive_typo"])
    assert "Available options in 'variant'" in str(e.value) and "cpu_blas" in str(e.value)


def test_unknown_precision_fails_listing_the_valid_choices():
    with pytest.raises(MissingConfigException) as e:
        compose_cfg(["precision=fp17"])
    assert "fp16" in str(e.value)


def test_wrong_type_fails_at_compose():
    with pytest.raises(ConfigCompositionException):
        compose_cfg(["measure.min_samples=lots"])


def test_bad_enum_value_names_the_choices():
    with pytest.raises(ConfigCompositionException) as e:
        compose_cfg(["measure.cache=lukewarm"])
    text = str(e.value) + str(e.value.__cause__)
    assert "flush" in text and "rotate" in text


@pytest.mark.slow
@pytest.mark.parametrize("bad,word", [("[0]", "positive"), ("[-5]", "positive"), ("[100000000]", "max_dim")])
def test_non_positive_or_absurd_sizes_fail_naming_the_value(bad, word):
    cfg = compose_cfg([f"sizes.square={bad}"])
    with pytest.raises(ConfigError) as e:
        shapes(cfg.sizes)
    assert word in str(e.value) and bad.strip("[]") in str(e.value)


def test_shapes_must_have_three_dimensions():
    cfg = compose_cfg(["sizes=smoke", "sizes.shapes=[[1,2]]"])
    with pytest.raises(ConfigError, match=r"\[m, n, k\]"):
        shapes(cfg.sizes)


def test_points_cover_variant_x_precision_x_shape_with_skip_reasons():
    cfg = compose_cfg(["variant=[cpu_blas,cublas]", "precision=[fp32,bf16]", "sizes=smoke"])
    pts = expand(cfg)
    assert len(pts) == 2 * 2 * len(shapes(cfg.sizes))
    cpu_bf16 = [p for p in pts if p.variant == "cpu_blas" and p.precision == "bf16"]
    assert cpu_bf16 and all("does not support bf16" in p.skip_reason for p in cpu_bf16)
    assert all(p.skip_reason is None for p in pts if p.variant == "cpu_blas" and p.precision == "fp32")


def test_point_work_and_intensity_follow_the_storage_types():
    cfg = compose_cfg(["variant=cpu_blas", "precision=fp32", "sizes.square=[1024]", "sizes.shapes=[]"])
    (p,) = expand(cfg)
    assert p.flops == 2 * 1024**3
    assert p.bytes_min == 4 * 3 * 1024**2
    assert p.intensity == pytest.approx(1024 / 6)  # the chapter's "about 170" at N = 1024


def test_point_keys_are_stable_and_distinguish_configs():
    a = expand(compose_cfg(["variant=cpu_blas", "precision=fp32", "sizes=smoke"]))
    b = expand(compose_cfg(["variant=cpu_blas", "precision=fp32", "sizes=smoke"]))
    c = expand(compose_cfg(["variant=cpu_blas", "precision=fp32", "sizes=smoke", "variant.cpu_blas.threads=1"]))
    assert [p.key for p in a] == [p.key for p in b]
    assert len({p.key for p in a}) == len(a)
    assert not {p.key for p in a} & {p.key for p in c}
    # how a point is timed is part of it; how long the stopping rule waits is not
    d = expand(compose_cfg(["variant=cpu_blas", "precision=fp32", "sizes=smoke", "measure.timer=cupti"]))
    e = expand(compose_cfg(["variant=cpu_blas", "precision=fp32", "sizes=smoke", "measure.max_time_s=9"]))
    assert not {p.key for p in a} & {p.key for p in d}
    assert [p.key for p in a] == [p.key for p in e]
