"""Reports: versioned JSON schema, CSV, Markdown, HTML plots, Table 6 layout, atomic writes."""

import csv
import errno
import io
import json
import os

import pytest

from mobilebert_kit.errors import MbkError
from mobilebert_kit.profiler.errors import ProfilerError
from mobilebert_kit.profiler.host import HostProfiler
from mobilebert_kit.profiler.report import (
    SCHEMA_VERSION,
    build_report,
    load_report,
    to_csv,
    to_markdown,
    validate_report,
    write_csv,
    write_json,
)
from mobilebert_kit.profiler.report_html import plots, to_html, write_html
from mobilebert_kit.profiler.table6 import table6, table6_markdown

QUICK = {"runs": 8, "warmup": 1, "min_time_s": 0.0}


@pytest.fixture(scope="module")
def table6_results(models):
    profiler = HostProfiler(**QUICK)
    return [profiler.profile(models[key]) for key in ("ln_gelu", "nn_relu", "ln_gelu_int8", "nn_relu_int8")]


def test_report_is_versioned_and_round_trips(table6_results, tmp_path):
    report = build_report(table6_results, options={"target": "host"})
    assert report["schema"] == "mobilebert_kit.profile" and report["schema_version"] == SCHEMA_VERSION == 1
    assert report["simulated"] is False and report["incomplete"] is False
    path = write_json(report, tmp_path / "r.json")
    assert load_report(path)["results"][0]["model"]["name"] == "ln_gelu"
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask


def test_validation_names_every_problem(table6_results):
    report = build_report(table6_results)
    broken = json.loads(json.dumps(report))
    broken["schema_version"] = 99
    del broken["results"][0]["latency_ms"]["p99"]
    broken["results"][1]["flops"] = "many"
    with pytest.raises(ProfilerError) as err:
        validate_report(broken)
    message = str(err.value)
    assert "schema_version is 99" in message and "latency_ms.p99 is missing" in message and "results[1].flops has type str" in message


def test_csv_and_markdown(table6_results):
    report = build_report(table6_results)
    rows = list(csv.DictReader(io.StringIO(to_csv(report))))
    assert [r["model"] for r in rows] == ["ln_gelu", "nn_relu", "ln_gelu_int8", "nn_relu_int8"]
    assert float(rows[0]["median_ms"]) == pytest.approx(table6_results[0]["latency_ms"]["median"])
    assert rows[2]["precision"] == "dynamic-int8" and rows[1]["variant"] == "NoNorm+ReLU"
    markdown = to_markdown(report)
    assert markdown.count("\n| ln_gelu |") == 1 and "| median ms |" in markdown


def test_table6_layout(table6_results):
    report = build_report(table6_results)
    (table,) = table6(report)
    assert table["precisions"] == ["float32", "dynamic-int8"]
    assert [row["setting"] for row in table["rows"]] == ["LayerNorm+GELU", "NoNorm+ReLU"]
    baseline, nonorm = table["rows"]
    for precision, a, b in (("float32", 0, 1), ("dynamic-int8", 2, 3)):
        ln_ms = table6_results[a]["latency_ms"]["median"]
        nn_ms = table6_results[b]["latency_ms"]["median"]
        assert baseline["cells"][precision]["median_ms"] == ln_ms
        assert nonorm["cells"][precision]["speedup"] == pytest.approx(ln_ms / nn_ms)
    text = table6_markdown(report)
    assert "| Setting | #FLOPs | float32 latency (ms) | dynamic-int8 latency (ms) |" in text
    assert text.count("\n| NoNorm+ReLU |") == 1


def test_html_has_plots_and_tables(table6_results, models, tmp_path):
    longer = HostProfiler(**QUICK).profile(models["dynamic"], seq_len=32)
    shorter = HostProfiler(**QUICK).profile(models["dynamic"], seq_len=8)
    report = build_report(table6_results + [longer, shorter])
    titles = [title for title, _ in plots(report)]
    assert titles == ["Latency distributions", "Comparison across files", "Latency against sequence length"]
    page = to_html(report)
    assert page.count("data:image/png;base64,") == 3 and "Table 6 layout" in page and "SIMULATED" not in page
    write_html(report, tmp_path / "r.html")
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")


def test_writes_are_atomic(table6_results, tmp_path, monkeypatch):
    report = build_report(table6_results)
    target = tmp_path / "r.csv"
    write_csv(report, target)  # an earlier run's report: replaced only when the new one is complete
    old = target.read_bytes()

    def boom(*args, **kwargs):
        raise OSError(errno.ENOSPC, "disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(MbkError, match="disk full while writing"):
        write_csv(report, target)
    assert target.read_bytes() == old
    assert os.listdir(tmp_path) == ["r.csv"]


def test_a_csv_written_with_a_changed_header_is_still_its_own(table6_results, tmp_path, monkeypatch):
    # Issue 34 item 3: utils/atomic.py recognised a profile CSV by a hard-coded copy of its header's first
    # columns; a column added in front made the next run refuse its own file. The kind is now declared beside
    # the header and built from the very line to_csv writes.
    import mobilebert_kit.profiler.report as profile_report
    from mobilebert_kit.utils.atomic import OutputError

    report = build_report(table6_results)
    old = tmp_path / "old.csv"
    write_csv(report, old)
    monkeypatch.setattr(profile_report, "CSV_COLUMNS", ("run_id",) + profile_report.CSV_COLUMNS)
    target = tmp_path / "r.csv"
    write_csv(report, target)
    assert target.read_text().startswith("run_id,model,format,")
    assert profile_report.PROFILE_CSV.recognises(target)
    write_csv(report, target)  # the next run replaces it without --overwrite
    assert list(csv.DictReader(io.StringIO(target.read_text())))[0]["model"] == "ln_gelu"
    # A table with the former header is no longer this format: replaced only with --overwrite, like any file.
    with pytest.raises(OutputError, match="is a file that is not a profile CSV table"):
        write_csv(report, old)
    write_csv(report, old, overwrite=True)
    assert old.read_text().startswith("run_id,")


def test_missing_output_directory_is_created(table6_results, tmp_path):
    # Every writer of the package creates missing parents (utils.atomic); a parent that is a file is refused.
    write_json(build_report(table6_results), tmp_path / "no" / "r.json")
    assert json.loads((tmp_path / "no" / "r.json").read_text())["schema"] == "mobilebert_kit.profile"
    (tmp_path / "file").write_text("x")
    with pytest.raises(MbkError, match="is not a directory"):
        write_json(build_report(table6_results), tmp_path / "file" / "r.json")


def test_incomplete_report_keeps_the_error(table6_results):
    partial = dict(table6_results[0], incomplete=True)
    report = build_report([partial], error="device X disconnected")
    assert report["incomplete"] and report["error"] == "device X disconnected"
    assert "Incomplete run" in to_markdown(report)


@pytest.mark.parametrize("text, fragment", [("[" * 100_000, "nests too deeply"), ("[1]", "JSON object")])
def test_a_hostile_report_file_is_one_line(tmp_path, text, fragment):
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(ProfilerError, match=fragment) as err:
        load_report(path)
    assert "\n" not in str(err.value)
