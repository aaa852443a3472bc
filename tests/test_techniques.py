"""analysis.techniques: what each technique buys, made from a define sweep's rows. The tables in stage 12's header and
in the README are what their rows give (a stale number fails here); the table of session5c's stage-12 sweep holds
the numbers the README's row-checked table of the top rungs holds; a block written wrong is named."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ROOT

from analysis import data, techniques

S5C = ROOT / "outputs" / "reference" / "h200-2026-12-01" / "session5c" / "tune_wgmma_ws"
S9C = ROOT / "outputs" / "reference" / "h200-2026-12-02" / "session9c" / "ws_nt_square"
S27B = ROOT / "outputs" / "reference" / "h200-2026-12-05" / "session27b" / "tune_wgmma_fp8"
needs_rows = pytest.mark.skipif(not (S5C.is_dir() and S9C.is_dir() and S27B.is_dir()),
                                reason="the H200 reference sweeps are not here")
MARKED = [ROOT / "kernels" / "cuda" / "12_wgmma_ws.cu", ROOT / "kernels" / "cuda" / "13_wgmma_fp8.cu",
          ROOT / "README.md"]


@needs_rows
def test_a_sweeps_table_is_each_configuration_against_the_library():
    t = techniques.table(data.load(S5C))
    assert list(t.columns) == ["4096", "8192"] and t.index[0] == "defaults"
    assert t.loc["defaults"].tolist() == ["99.2", "100.4*"]
    assert t.loc["MBAR_CLUSTER_SCOPE 1"].tolist() == ["64.9", "60.4*"]
    assert t.loc["CLUSTER_M 1, EPI_BOXES 0, GRID_CTAS 0, STAGES 3"].tolist() == ["96.2*", "98.7*"]  # the old default
    assert t.loc["EPI_TMA 0"].tolist() == ["90.8*", "97.5"]
    assert len(t) == 11
    nt = techniques.table(data.load(S9C))
    assert nt.loc["GRID_CTAS 0, PRODUCER_SCHEDULES 1, STREAM_K 1"].tolist() == ["93.1", "97.4*", "102.7*"]


@needs_rows
@pytest.mark.parametrize("path", MARKED, ids=[p.name for p in MARKED])
def test_the_marked_tables_are_what_their_rows_give(path):
    text = path.read_text()
    assert "BEGIN techniques" in text
    assert techniques.sync(text) == text, f"python -m analysis.techniques --sync {path.relative_to(ROOT)}"
    assert techniques.main(["--check", str(path)]) == 0


@needs_rows
def test_a_stale_or_broken_block_is_named(tmp_path, capsys):
    header = (ROOT / "kernels" / "cuda" / "12_wgmma_ws.cu").read_text()
    stale = tmp_path / "stale.cu"
    stale.write_text(header.replace("// MBAR_CLUSTER_SCOPE 1                             64.9    60.4*",
                                    "// MBAR_CLUSTER_SCOPE 1                             99.9    60.4*"))
    assert stale.read_text() != header, "the control no longer matches the header's line"
    assert techniques.main(["--check", str(stale)]) == 1
    assert "is not what its rows give" in capsys.readouterr().err
    assert techniques.main(["--sync", str(stale)]) == 0 and stale.read_text() == header  # written back
    broken = tmp_path / "broken.md"
    broken.write_text("<!-- BEGIN techniques outputs/reference/h200-2026-12-01/session5c/tune_wgmma_ws -->\n| x |\n")
    assert techniques.main(["--check", str(broken)]) == 2
    assert "has no END techniques" in capsys.readouterr().err
    broken.write_text("// BEGIN techniques outputs/reference/no_such_folder\n// END techniques\n")
    assert techniques.main(["--check", str(broken)]) == 2
    assert "no_such_folder" in capsys.readouterr().err
    assert techniques.main([]) == 2


@needs_rows
def test_a_folder_of_several_variants_needs_one_named(capsys):
    both = ROOT / "outputs" / "reference" / "h200-2026-12-01" / "session4"
    assert techniques.main([str(both)]) == 2
    assert "name one with --variant" in capsys.readouterr().err
    assert techniques.main([str(both / "tune_wgmma_fp8")]) == 0
    out = capsys.readouterr().out
    assert "| defaults | 104.4 | 99.0 |" in out and "| `GROUP_M 16` | 104.5 | 99.2* |" in out


@needs_rows
def test_a_cell_can_show_the_clock_and_power_beside_the_percentage(capsys):
    """Issue 32: the clock and power of each variant beside its TFLOP/s; session9c's stream-K row at 4096 is slower at
    the defaults' clock and power."""
    t = techniques.table(data.load(S9C), show=["pct", "tflops", "clock", "power"])
    assert t.loc["defaults", "4096"] == "99.4, 740 TFLOP/s, 1860 MHz, 660 W"
    assert t.loc["GRID_CTAS 0, PRODUCER_SCHEDULES 1, STREAM_K 1", "4096"] == "93.1, 686 TFLOP/s, 1815-1890 MHz, 659 W"
    with pytest.raises(ValueError, match="watts is not one of"):
        techniques.table(data.load(S9C), show=["pct", "watts"])


FRAG = ROOT / "outputs" / "reference" / "h200-2026-12-05" / "session28b" / "decode_rows_frag"


@pytest.mark.skipif(not FRAG.is_dir(), reason="session28b's stage-16 sweep is not here")
def test_a_sweep_over_precisions_and_point_rules_keeps_them_apart():
    """session28b's stage-16 sweep: bf16 and fp8 jobs of five define sets, and defines a point rule sets per token
    count (NT, XSTAGE). A column per problem and precision (a cell never pools the two), a line per define set (the
    defines constant over a job; the bf16 and fp8 jobs of one set on one line)."""
    t = techniques.table(data.load(FRAG))
    assert len(t) == 5 and t.index[0] == "defaults"
    assert t.loc["defaults", "16x57344x8192 bf16"] == "100.7" and t.loc["defaults", "16x57344x8192 fp8"] == "87.6"
    assert t.loc["defaults", "1x6144x4096 fp8"] == "no baseline"  # cuBLASLt's FP8 has no M = 1 kernel
    assert not any("NT " in label for label in t.index)


@needs_rows
@pytest.mark.parametrize("text,said", [
    ("// BEGIN techniques {p}\n// x\n// BEGIN techniques {p}\n// END techniques\n", "before the next BEGIN"),
    ("// END techniques\n", "without a BEGIN"),
    ("<!-- BEGIN techniques {p} --> a note\n<!-- END techniques -->\n", "a BEGIN techniques line is"),
    ("// BEGIN techniques {p} shows=pct\n// END techniques\n", "the options are"),
])
def test_a_marked_block_written_wrong_is_refused(text, said):
    with pytest.raises(ValueError, match=said):
        techniques.sync(text.format(p="outputs/reference/h200-2026-12-01/session5c/tune_wgmma_ws"))


@needs_rows
def test_two_blocks_and_one_at_the_end_of_a_file_are_each_written():
    p = "outputs/reference/h200-2026-12-01/session5c/tune_wgmma_ws"
    text = (f"a\n<!-- BEGIN techniques {p} -->\nold\n<!-- END techniques -->\nb\n"
            f"// BEGIN techniques {p}\n// END techniques")
    out = techniques.sync(text)
    assert out.count("| defaults | 99.2 | 100.4* |") == 1 and "old" not in out
    assert out.count("// defaults") == 1 and out.endswith("// END techniques") and techniques.sync(out) == out
