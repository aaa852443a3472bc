"""Settings checked at compose time: every key against its schema, every value against its range.

Hydra checks types and enum values while it composes, but not ranges (``measure.batch=0``) and
not keys added with ``+`` (``+measure.warmpu_s=1`` turns the struct flag off for that key). This
module does both on the composed config, before any point is measured:

- :data:`RULES` is the one place that says what each setting may be, per schema dataclass and
  field; a dataclass nested anywhere in the config (a ``VariantConf`` under ``variant.<name>``)
  gets its rules wherever it appears.
- :func:`problems` walks the composed config next to the dataclasses of ``gemmlab.config``: a key
  that is not a field of its node's dataclass is reported with the closest valid key.
- :func:`argv_problem` looks at the command line before Hydra parses it, for what Hydra would
  report badly: a group option its override grammar cannot lex (``variant=naïve``), an enum
  value, a misspelt key (Hydra suggests appending it with ``+``).

Each problem is one line: ``measure.min_samples=-1 is invalid: must be an integer >= 1``.
"""
from __future__ import annotations

import dataclasses
import difflib
import enum
import functools
import math
import typing
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from omegaconf import DictConfig, ListConfig, OmegaConf

from gemmlab import config as C
from gemmlab import variants
from gemmlab.operands import LAYOUTS

EXIT_CODE = 2  # a usage error, as argparse uses it


class SettingError(ValueError):
    """A setting no run can use; ``str()`` is the one line printed for it."""


# -- the rules --------------------------------------------------------------------------------
class Rule:
    relational = False  # compares with another field: checked once every field is in range

    def check(self, value: Any, node: DictConfig) -> Optional[str]:
        """None when ``value`` (the field's value in ``node``) is valid, else what it must be."""
        raise NotImplementedError


@dataclass(frozen=True)
class Range(Rule):
    """An integer or a finite number within [lo, hi] (``lo_open``/``hi_open``: excluded)."""

    integer: bool
    lo: Optional[float] = None
    hi: Optional[float] = None
    lo_open: bool = False
    hi_open: bool = False
    nullable: str = ""  # non-empty: null is valid and means this

    def describe(self) -> str:
        what = "an integer" if self.integer else "a finite number"
        if self.lo is not None and self.hi is not None:
            lo, hi = _num(self.lo), _num(self.hi)
            text = (f"{what} in {'(' if self.lo_open else '['}{lo}, {hi}{')' if self.hi_open else ']'}")
        elif self.lo is not None:
            text = f"{what} {'>' if self.lo_open else '>='} {_num(self.lo)}"
        elif self.hi is not None:
            text = f"{what} {'<' if self.hi_open else '<='} {_num(self.hi)}"
        else:
            text = what
        if self.nullable:
            text = f"null ({self.nullable}) or {text}"
        return text

    def check(self, value, node=None) -> Optional[str]:
        if value is None and self.nullable:
            return None
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok and self.integer:
            ok = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if ok and not math.isfinite(value):
            ok = False
        if ok and self.lo is not None:
            ok = value > self.lo if self.lo_open else value >= self.lo
        if ok and self.hi is not None:
            ok = value < self.hi if self.hi_open else value <= self.hi
        return None if ok else f"must be {self.describe()}"


def integer(lo=None, hi=None, nullable: str = "") -> Range:
    return Range(True, lo=lo, hi=hi, nullable=nullable)


def number(lo=None, hi=None, lo_open=False, hi_open=False) -> Range:
    return Range(False, lo=lo, hi=hi, lo_open=lo_open, hi_open=hi_open)


POSITIVE = number(lo=0, lo_open=True)
NON_NEGATIVE = number(lo=0)
FRACTION = number(lo=0, hi=1, lo_open=True)  # (0, 1]


@dataclass(frozen=True)
class AtMost(Rule):
    """Not larger than another field of the same node (min_samples <= max_samples)."""

    other: str
    relational = True

    def check(self, value, node) -> Optional[str]:
        other = _value(node, self.other)
        if isinstance(value, (int, float)) and isinstance(other, (int, float)) and value > other:
            return f"must be <= {_path_of(node, self.other)} ({_fmt(other)})"
        return None


@dataclass(frozen=True)
class PowerOfTwoWhen(Rule):
    """A power of two (positive or negative exponent) when another field has a given value."""

    field: str
    equals: str
    why: str
    relational = True

    def check(self, value, node) -> Optional[str]:
        if _enum_name(_value(node, self.field)) != self.equals:
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 \
                and math.isfinite(value) and math.frexp(value)[0] == 0.5:
            return None
        return f"must be a power of two (0.25, 1, 4, ...) with {_path_of(node, self.field)}={self.equals}: {self.why}"


@dataclass(frozen=True)
class OnlyWhenNot(Rule):
    """Must be ``allowed`` when another field has a given value."""

    allowed: str
    field: str
    equals: str
    why: str
    relational = True

    def check(self, value, node) -> Optional[str]:
        if _enum_name(_value(node, self.field)) != self.equals or _enum_name(value) == self.allowed:
            return None
        return f"must be {self.allowed} with {_path_of(node, self.field)}={self.equals}: {self.why}"


@dataclass(frozen=True)
class NamesOf(Rule):
    """A list whose entries are names from ``choices()`` (a function: the set can grow)."""

    what: str
    choices: Callable[[], Sequence[str]]

    def check(self, value, node=None) -> Optional[str]:
        known = list(self.choices())
        for name in list(value or []):
            if name not in known:
                return f"{name!r} is not {self.what}{_did_you_mean(str(name), known)}"
        return None


@dataclass(frozen=True)
class Each(Rule):
    """A non-empty list whose every entry passes ``rule`` (an axis: layouts, batch)."""

    rule: Rule

    def check(self, value, node=None) -> Optional[str]:
        entries = list(value or [])
        if not entries:
            return "must list at least one value"
        names = isinstance(self.rule, NamesOf)  # it checks a list of names
        for v in entries:
            msg = self.rule.check([v] if names else v, node)
            if msg:
                return msg if names else f"{_fmt(v)} {msg}"
        return None


def _variant_names() -> List[str]:
    return sorted(variants.files())


# What every setting may be, per schema dataclass and field. A numeric field of MeasureConf or
# RunConf without an entry here fails tests/test_validate.py.
RULES: Dict[type, Dict[str, Tuple[Rule, ...]]] = {
    C.MeasureConf: {
        "warmup_s": (NON_NEGATIVE,),
        "warmup_min_iters": (integer(lo=1),),  # the GPU timer learns each call's enqueue cost there
        "min_samples": (integer(lo=1), AtMost("max_samples")),
        "max_samples": (integer(lo=1),),
        "min_time_s": (NON_NEGATIVE, AtMost("max_time_s")),
        "max_time_s": (POSITIVE,),  # 0 would stop before the first sample
        "max_noise": (POSITIVE,),
        "max_samples_ci": (integer(lo=1),),  # <= max_samples: no samples past max_samples
        "max_median_ci": (FRACTION,),
        "max_noise_hard": (POSITIVE,),
        "batch": (integer(lo=1),),
        "busy_us": (NON_NEGATIVE,),
        "flush_bytes": (integer(lo=0),),  # 0: twice the device's L2
        "seed": (integer(lo=0),),  # numpy's and cupy's default_rng
        "input_scale": (POSITIVE, PowerOfTwoWhen(
            "distribution", "exact", "the inputs' products and sums must stay exact")),
        "fp8_scaling": (OnlyWhenNot("none", "distribution", "exact",
                                    "scales from amax are not powers of two, so the scaled products are not exact"),),
        "check_repeats": (integer(lo=1),),
        "throttle_fraction": (FRACTION,),
        "clock_stable_fraction": (FRACTION,),
        "baseline": (NamesOf("a variant (conf/variant/*.yaml)", _variant_names),),
        "threads": (integer(lo=1, nullable="the library's default"),),
        "energy_s": (POSITIVE,),
        "guard_bytes": (integer(lo=0),),  # 0: guards off
        "point_timeout_s": (NON_NEGATIVE,),  # 0: derived per phase
        "point_timeout_floor_s": (POSITIVE,),
    },
    C.RunConf: {
        "gpu_wait_s": (NON_NEGATIVE,),
    },
    C.SizesConf: {
        "max_dim": (integer(lo=1),),
    },
    C.DeviceConf: {
        "sm_count": (integer(lo=1, nullable="read from the GPU"),),
    },

    C.GemmlabConf: {
        "layouts": (Each(NamesOf("a layout", lambda: LAYOUTS)),),
        "batch": (Each(integer(lo=1)),),
    },
    C.VariantConf: {
        "threads": (integer(lo=1, nullable="all cores"),),
        "layouts": (NamesOf("a layout", lambda: LAYOUTS),),
    },
    C.CublasLtConf: {
        "autotune_iterations": (integer(lo=1),),
        "search_limit": (integer(lo=1),),
    },
}


# -- the walk over the composed config ----------------------------------------------------------
@dataclass(frozen=True)
class Problem:
    path: str
    value: Any
    message: str

    def __str__(self) -> str:
        return f"{self.path}={_fmt(self.value)} is invalid: {self.message}"


def problems(cfg: DictConfig, schema: type = C.GemmlabConf) -> List[Problem]:
    """Every unknown key and every out-of-range value of ``cfg`` (a composed run config)."""
    out: List[Problem] = []
    _walk(cfg, schema, "", out)
    return out


def check(cfg: DictConfig) -> None:
    """Raise :class:`SettingError` naming the first problem of ``cfg``."""
    found = problems(cfg)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise SettingError(f"{found[0]}{more}")


def _walk(node: Any, tp: Any, path: str, out: List[Problem]) -> None:
    tp = _unwrap_optional(tp)
    if not isinstance(node, (DictConfig, ListConfig)) or node._is_none() or node._is_missing() \
            or node._is_interpolation():
        return
    if isinstance(node, DictConfig) and dataclasses.is_dataclass(OmegaConf.get_type(node)):
        tp = OmegaConf.get_type(node)  # a structured node knows its dataclass
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp) and isinstance(node, DictConfig):
        fields = _fields(tp)
        for key in node.keys():
            key = str(key)
            if path == "" and key == "hydra":
                continue
            sub = f"{path}.{key}" if path else key
            if key not in fields:
                out.append(Problem(sub, _raw(node, key), _unknown_key(key, tp, path, fields)))
            else:
                _walk(node._get_node(key), fields[key], sub, out)
        _check_fields(node, tp, path, out)
    elif origin in (dict, Dict) and isinstance(node, DictConfig):
        vt = typing.get_args(tp)[1] if typing.get_args(tp) else Any
        for key in node.keys():
            _walk(node._get_node(key), vt, f"{path}.{key}" if path else str(key), out)
    elif origin in (list, List) and isinstance(node, ListConfig):
        et = typing.get_args(tp)[0] if typing.get_args(tp) else Any
        for i in range(len(node)):
            _walk(node._get_node(i), et, f"{path}[{i}]", out)


def _check_fields(node: DictConfig, tp: type, path: str, out: List[Problem]) -> None:
    """The rules of ``tp``'s fields: each field's own range first, then the rules that compare
    it with another field, for the fields whose own ranges hold."""
    rules = {name: r for name, r in RULES.get(tp, {}).items() if name in node}
    values, bad = {}, set()
    for relational in (False, True):
        for name, field_rules in rules.items():
            if name in bad:
                continue
            if name not in values:
                try:
                    values[name] = _value(node, name)
                except Exception:  # an interpolation that cannot resolve here: Hydra reports it
                    bad.add(name)
                    continue
            for rule in field_rules:
                if rule.relational != relational or getattr(rule, "other", None) in bad:
                    continue
                msg = rule.check(values[name], node)
                if msg:
                    out.append(Problem(f"{path}.{name}" if path else name, values[name], msg))
                    bad.add(name)
                    break


@functools.lru_cache(maxsize=None)
def _fields(tp: type) -> Dict[str, Any]:
    hints = typing.get_type_hints(tp)
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(tp)}


def _unwrap_optional(tp: Any) -> Any:
    if typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _unknown_key(key: str, tp: type, path: str, fields: Iterable[str]) -> str:
    where = path or "the root config"
    return f"unknown key: {key!r} is not in {tp.__name__} ({where}){_did_you_mean(key, list(fields), path)}"


def _did_you_mean(word: str, known: Sequence[str], prefix: str = "") -> str:
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {prefix + '.' if prefix else ''}{close[0]}?"
    return f"; valid: {', '.join(known)}"


# -- the command line, before Hydra parses it -------------------------------------------------
# Hydra's flags whose value is the next argument (not an override)
_VALUE_FLAGS = {"--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd",
                "--experimental-rerun", "--package", "-p", "--shell-completion", "-sc"}


def argv_problem(argv: Sequence[str]) -> Optional[str]:
    """The first command-line override Hydra would reject without saying what is valid, as one
    line; None when there is none (Hydra then parses the command line as usual)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            break
        if arg in _VALUE_FLAGS:
            i += 1
            continue
        if arg.startswith("-") or "=" not in arg:
            continue
        key = arg.split("=", 1)[0].lstrip("+~").split("@", 1)[0]
        try:
            (override,) = parser.parse_overrides([arg])
        except OverrideParseException:
            options = group_options(key)
            if options is None:
                continue  # not a config group: Hydra's own error says where the lexer stopped
            return (f"{arg} is invalid: Hydra's override grammar cannot read {arg.split('=', 1)[1]!r} "
                    f"(ASCII letters, digits and _-./ in option names); valid choices for {key}: "
                    f"{', '.join(options)}")
        if override.is_delete() or "/" in key or "." not in key or key.startswith("hydra."):
            continue  # group choices and Hydra's own keys: Hydra checks them
        msg = _override_problem(key, override, force_add=arg.startswith("+"))
        if msg:
            return f"{arg} is invalid: {msg}"
    return None


def _override_problem(key: str, override, force_add: bool) -> Optional[str]:
    tp: Any = C.GemmlabConf
    path = ""
    for part in key.split("."):
        tp = _unwrap_optional(tp)
        origin = typing.get_origin(tp)
        if dataclasses.is_dataclass(tp):
            fields = _fields(tp)
            if part not in fields:
                return _unknown_key(part, tp, path, fields)
            tp = fields[part]
        elif origin in (dict, Dict):
            args = typing.get_args(tp)
            tp = args[1] if args else Any
        else:
            return None  # a list index, or inside a free-form mapping: Hydra checks
        path = f"{path}.{part}" if path else part
    tp = _unwrap_optional(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        names = [m.name for m in tp]
        try:
            values = list(override.sweep_string_iterator()) if override.is_sweep_override() \
                else [override.value()]
        except Exception:
            return None  # a range or glob sweep: Hydra checks each value
        for v in values:
            if v is not None and str(v) not in names:
                return f"must be one of {', '.join(names)}"
    return None


def group_options(group: str) -> Optional[List[str]]:
    """The options of config group ``group`` as Hydra lists them, None if there is no such group."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    C.register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(C.CONF_DIR), version_base="1.3"):
            loader = GlobalHydra.instance().config_loader()
            parent, _, name = group.rpartition("/")
            if not name or name not in loader.list_groups(parent):
                return None
            return sorted(loader.get_group_options(group))
    finally:
        GlobalHydra.instance().clear()


# -- small helpers --------------------------------------------------------------------------
def _value(node: DictConfig, key: str) -> Any:
    v = node[key]
    if isinstance(v, (DictConfig, ListConfig)):
        return OmegaConf.to_container(v, resolve=True, enum_to_str=True)
    return v


def _raw(node: DictConfig, key: str) -> Any:
    try:
        return _value(node, key)
    except Exception:
        return node._get_node(key)._value()


def _path_of(node: DictConfig, key: str) -> str:
    full = node._get_full_key(key)
    return str(full) if full else key


def _enum_name(v: Any) -> Any:
    return v.name if isinstance(v, enum.Enum) else v


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def _fmt(v: Any) -> str:
    if isinstance(v, enum.Enum):
        return v.name
    if v is None:
        return "null"
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_fmt(x)}" for k, x in v.items()) + "}"
    return str(v)
