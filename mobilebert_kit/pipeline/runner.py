"""Pipeline: one recipe end to end, with stages that are skipped when their inputs did not change.

Stages, in order: ``export`` (one per artifact, plus a float32 baseline per format for a quantized recipe),
``profile-host``, ``profile-device`` (with ``device``), ``evaluate`` (with ``[evaluation] data``) and ``report``;
docs/pipeline.md says what each writes, when its manifest skips it, and how an interrupted run resumes.
"""

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import mobilebert_kit
from mobilebert_kit.artifacts.carried_tokenizer import carried_tokenizer, carries_app_tokenizer
from mobilebert_kit.artifacts.client_metadata import read_with_client_metadata
from mobilebert_kit.artifacts.metadata import parse_mbk_metadata, planned_length, read_artifact_metadata
from mobilebert_kit.artifacts.emulated_runner import emulation_ready
from mobilebert_kit.artifacts.formats import FORMATS
from mobilebert_kit.errors import MbkError
from mobilebert_kit.pipeline import report as pipeline_report
from mobilebert_kit.pipeline.manifest import StageManifest, file_hash
from mobilebert_kit.pipeline.report import EVALUATION_JSON, EVALUATION_SCHEMA, NOISE_TOLERANCE, PIPELINE_OUTPUT
from mobilebert_kit.profiler.report import build_report, write_json
from mobilebert_kit.profiler.result import PROFILE_LIMITS
from mobilebert_kit.sources.spec import classify, locate
from mobilebert_kit.utils.atomic import prepared_dir, write_text
from mobilebert_kit.utils.input_paths import check_input_path
from mobilebert_kit.utils.limits import check_number
from mobilebert_kit.utils.structured import load_json
from mobilebert_kit.utils.terminal import escape

DEFAULT_RUNS = 20
# Timings of a noisy machine are taken again with 4x the runs, at most this many times in all (report.py flags
# what is still noisy after them).
MAX_ATTEMPTS = 3
DEFAULT_WARMUP = 3
_FILE_OPTIONS = ("calibration", "validation_data", "recover_data")


class Pipeline:
    """Runs a recipe: export, validate, profile, report.

    Args:
        recipe: path of the TOML recipe (``export/NAME.toml``).
        source: a preset name or model path replacing the recipe's ``[source]`` (None: the recipe's).
        out_dir: directory of every output (None: the recipe's ``out_dir``).
        force: re-run every stage even when its manifest matches.
        runs: timed runs per artifact on the host (and per trial on a phone).
        threads: inference threads.
        device: serial of an Android phone to profile the ``.tflite`` artifacts on (None: host only).
        adb: the adb client to use (None: ``adb`` on PATH).
        benchmark_binary: LiteRT benchmark_model for the phone (None: the profiler's cache).
        trials: benchmark_model invocations per artifact on the phone.
        console: a ``rich`` Console for progress (None: one on stdout).
        overwrite: use an output directory (and replace files in it) that mbk did not write; never one
            holding the recipe or the source (``utils.atomic``).

    Example:
        >>> report = Pipeline("export/default.toml", source="mobilebert").run()  # doctest: +SKIP
        >>> report["artifacts"][0]["latency_ms"]["host"]  # doctest: +SKIP
        12.5
    """

    def __init__(self, recipe, *, source=None, out_dir=None, force=False, runs=DEFAULT_RUNS, threads=1, device=None,
                 adb=None, benchmark_binary=None, trials=2, console=None, overwrite=False):
        for name, value in (("runs", runs), ("threads", threads), ("trials", trials)):
            check_number(f"--{name}", value, PROFILE_LIMITS[name])
        self.recipe_path = Path(recipe)
        self.source = source
        self.out_dir = Path(out_dir) if out_dir else None
        self.force = bool(force)
        self.overwrite = bool(overwrite)
        self.runs = runs
        self.threads = threads
        self.device = device
        self.adb = adb
        self.benchmark_binary = benchmark_binary
        self.trials = trials
        self.console = console or _console()
        self._source = None
        self._timings = []

    def plan(self):
        """Loads the recipe; returns ``(recipe, [ExportOptions])`` with float baselines first per format."""
        from mobilebert_kit.convert.recipe import Recipe
        from mobilebert_kit.pipeline.source import override_source

        recipe = Recipe.load(self.recipe_path)
        if self.source:
            override_source(recipe, self.source)
        options = recipe.options()
        if self.out_dir is not None:
            options = [dataclasses.replace(opts, out=str(self.out_dir / Path(opts.out).name)) for opts in options]
        arm64 = emulation_ready("arm64")
        planned = []
        for opts in options:
            if opts.quantize != "none":
                planned.append(_float_baseline(opts))
            if arm64 and opts.validate and opts.check_arch is None and not opts.tokenizer_in_graph:
                # The report's arm64 line: where the arm64 runtimes are built, the files are also run on them; not
                # the float32 baselines (emulated float kernels cost minutes a file: report.ARM64_BASELINE).
                opts = dataclasses.replace(opts, check_arch="arm64")
            planned.append(opts)
        return recipe, planned

    def run(self):
        """Runs every stage; returns the report dict (also written as JSON and HTML)."""
        recipe, planned = self.plan()
        out_dir = Path(planned[0].out).parent
        name = recipe.tables.get("export", {}).get("name", recipe.path.stem)
        serial = self._check_device()
        # The output directory is ours (marked), empty or new before any stage writes into it.
        sources = [recipe.path, recipe.tables.get("profile", {}).get("text")] + [
            p for o in planned for p in (o.source, o.calibration, o.validation_data, o.recover_data, o.eval_data)]
        with prepared_dir(out_dir, PIPELINE_OUTPUT, overwrite=self.overwrite,
                          sources=[p for p in sources if isinstance(p, (str, os.PathLike))]):
            # After the directory's own checks (a refusal to touch the user's files comes first), before any export.
            _check_vocabulary(recipe, planned)
            return self._run_stages(recipe, planned, out_dir, name, serial)

    def _run_stages(self, recipe, planned, out_dir, name, serial):
        source_hash = self._source_digest = _source_hash(recipe.source_spec())
        substitute = dict(recipe.tables.get("substitute", {}))
        if substitute.get("data"):
            substitute["data"] = file_hash(substitute["data"])
        evaluation = dict(recipe.tables.get("evaluation", {}))
        self._text = recipe.tables.get("profile", {}).get("text")  # [profile] text (a checked input path)
        self._stages = len(planned) * (2 + (1 if serial else 0)) + 1 + (1 if evaluation.get("data") else 0)
        self._step = 0
        say = self.console.print
        say(f"[bold]mbk pipeline[/bold] {escape(recipe.path, markup=True)} -> {escape(out_dir, markup=True)} "
            f"({self._stages} stages; source {escape(recipe.source_spec(), markup=True)})", highlight=False)
        exports = []
        for opts in planned:
            inputs = {"mbk": mobilebert_kit.__version__, "source": source_hash, "substitute": substitute,
                      "options": _option_inputs(opts)}
            manifest = StageManifest("export", [opts.out, f"{opts.out}.report.json"], inputs)
            self._stage(f"export {Path(opts.out).name} ({opts.format}, {opts.quantize}, seq {opts.seq_len or 'default'})",
                        manifest, lambda o=opts: self._export(recipe, o))
            exports.append(_read_json(f"{opts.out}.report.json"))
        host = [self._profile_host(opts) for opts in planned]
        device = [self._profile_device(opts, serial) for opts in planned if serial and FORMATS[opts.format].on_device]
        evaluation_path = self._evaluate(evaluation, planned, out_dir / f"{name}.evaluation.json")
        html_path, json_path = out_dir / f"{name}.pipeline.html", out_dir / f"{name}.pipeline.json"
        profile_files = host + device
        inputs = {"mbk": mobilebert_kit.__version__, "recipe": str(recipe.path),
                  "files": {str(p): file_hash(p) for p in [f"{o.out}.report.json" for o in planned] + profile_files
                            + ([evaluation_path] if evaluation_path else [])}}
        manifest = StageManifest("report", [json_path, html_path], inputs)

        def write_report():
            data = pipeline_report.build(recipe, planned, exports, [_read_json(p) for p in profile_files],
                                         timings=self._timings, arm64_ready=emulation_ready("arm64"),
                                         evaluation=_read_json(evaluation_path) if evaluation_path else None)
            pipeline_report.write(data, json_path, html_path, overwrite=self.overwrite)

        self._stage(f"report {html_path.name}", manifest, write_report)
        data = _read_json(json_path)
        pipeline_report.print_summary(data, self.console)
        say(f"report: {escape(html_path, markup=True)}\ndata:   {escape(json_path, markup=True)}", highlight=False)
        return data

    def _stage(self, title, manifest, work):
        """Runs ``work`` unless ``manifest`` is current; saves the manifest after it."""
        self._step += 1
        prefix = f"[{self._step}/{self._stages}]"
        if not self.force and manifest.is_current():
            self.console.print(f"{prefix} {escape(title, markup=True)}: unchanged, skipped", highlight=False)
            self._timings.append({"stage": title, "skipped": True, "seconds": 0.0})
            return False
        self.console.print(f"{prefix} {escape(title, markup=True)} ...", highlight=False)
        start = time.perf_counter()
        with self.console.status(escape(title, markup=True)):
            work()
        manifest.save()
        seconds = time.perf_counter() - start
        self._timings.append({"stage": title, "skipped": False, "seconds": seconds})
        self.console.print(f"{prefix} {escape(title, markup=True)}: done in {seconds:.1f} s", highlight=False)
        return True

    def _log(self, line):
        self.console.print(f"    {escape(line)}", markup=False, highlight=False)

    def _export(self, recipe, opts):
        from mobilebert_kit.convert.exporter import export
        from mobilebert_kit.evaluation.artifact_metrics import evaluate_artifact

        if self._source is None:  # substituted (and recovered) once per run, and only when an export has to run
            self._source = recipe.prepare(opts, log=self._log)
        result = export(dataclasses.replace(opts, overwrite=self.overwrite), source=self._source, log=self._log,
                        score=evaluate_artifact)
        if result.validation is not None:
            for line in result.validation.format_text().splitlines():
                self._log(line)

    def _profile_host(self, opts):
        from mobilebert_kit.convert.plan.sample_text import SAMPLE_TEXT
        from mobilebert_kit.profiler.host import HostProfiler

        out = Path(f"{opts.out}.host.json")
        seq_len = planned_length(read_artifact_metadata(opts.out))  # the length the export planned, as recorded
        settings = {"runs": self.runs, "warmup": DEFAULT_WARMUP, "threads": self.threads, "cores": "all",
                    "max_attempts": MAX_ATTEMPTS}
        # Real sentences at their own length beside the planned length: [profile] text, else the package's sample.
        text = self._text or SAMPLE_TEXT
        inputs = {"mbk": mobilebert_kit.__version__, "artifact": file_hash(opts.out), "settings": settings,
                  "seq_len": seq_len, "text": file_hash(text), "tokenizer": self._fed_tokenizer(opts)}
        name = Path(opts.out).name

        def work():
            profiler = HostProfiler(threads=self.threads, runs=self.runs, warmup=DEFAULT_WARMUP, min_time_s=0.0,
                                    max_time_s=120.0)
            attempts, real = {}, {"artifact": name, "source": str(text)}
            # A text-in file takes sentences only: it is timed on the text, not at a length of token arrays.
            results = [] if opts.tokenizer_in_graph else [self._steady(
                profiler, lambda: profiler.profile(opts.out, seq_len=seq_len), attempts, f"{name} padded")]
            sentences, why = _real_text(opts.out, text, opts.source)
            if sentences is not None:
                results.append(self._steady(profiler, lambda: profiler.profile_text(opts.out, sentences), attempts,
                                            f"{name} real text"))
            else:
                real["skipped"] = why
            write_json(build_report(results, options={"pipeline": str(self.recipe_path), **settings,
                                                      "attempts": attempts, "real_text": real}),
                       out, overwrite=self.overwrite)

        self._stage(f"profile {name} on the host ({self.runs} runs)", StageManifest("profile-host", [out], inputs), work)
        return out

    def _steady(self, profiler, measure, attempts, key):
        """``measure()``'s record, timed again with 4x the runs while the 95% interval of its median is wider than
        the report's tolerance (at most :data:`MAX_ATTEMPTS` times); ``attempts[key]`` counts the tries."""
        runs = profiler.runs
        try:
            for attempt in range(1, MAX_ATTEMPTS + 1):
                record = measure()
                attempts[key] = attempt
                if not pipeline_report.median_spread(record)[1]:
                    break
                # 4x the runs this attempt timed (real text times at least one pass over its sentences).
                timed = len(record.get("samples_ms") or [])
                profiler.runs = 4 * (timed or profiler.runs)
                if attempt < MAX_ATTEMPTS:
                    self._log(f"{key}: the 95% interval of the median is wider than {NOISE_TOLERANCE:.0%} after "
                              f"{timed} runs; timing again with {profiler.runs}")
        finally:
            profiler.runs = runs
        return record

    def _evaluate(self, settings, planned, out):
        """Task metrics of every artifact on ``[evaluation] data``, each against the first (the float file)."""
        if not settings.get("data"):
            return None
        from mobilebert_kit.evaluation.artifact_metrics import evaluate_artifact
        from mobilebert_kit.training.task_scoring import DEFAULT_MIN_RATIO, compare

        min_ratio = settings.get("min_ratio", DEFAULT_MIN_RATIO)
        inputs = {"mbk": mobilebert_kit.__version__, "data": file_hash(settings["data"]), "limit": settings.get("limit"),
                  "min_ratio": min_ratio, "artifacts": {Path(o.out).name: file_hash(o.out) for o in planned},
                  "tokenizers": {Path(o.out).name: self._fed_tokenizer(o) for o in planned}}

        def work():
            # Each at the file's own planned length, which evaluate_artifact reads.
            named = [(Path(opts.out).name, evaluate_artifact(opts.out, settings["data"], limit=settings.get("limit"),
                                                             num_threads=self.threads,
                                                             tokenizer=_app_tokenizer_of(opts.out, opts.source)))
                     for opts in planned]
            rows = compare(named, min_ratio)
            document = {"schema": EVALUATION_SCHEMA, "schema_version": 1, "data": str(settings["data"]),
                        "primary": rows[0]["primary"], "min_ratio": min_ratio,
                        "passed": all(row["passed"] for row in rows), "models": rows}
            write_text(out, json.dumps(document, indent=2, allow_nan=False) + "\n", kind=EVALUATION_JSON,
                       overwrite=self.overwrite)

        self._stage(f"evaluate {len(planned)} file(s) on {Path(settings['data']).name}",
                    StageManifest("evaluate", [out], inputs), work)
        return out

    def _fed_tokenizer(self, opts):
        """The source's content hash where ``opts.out`` is fed the source checkpoint's tokenizer (it carries none for
        its app: RoBERTa's BPE), else None: a stage key's part, since the file's bytes do not change with it."""
        return self._source_digest if _app_tokenizer_of(opts.out, opts.source) is not None else None

    def _profile_device(self, opts, serial):
        from mobilebert_kit.profiler.adb import AdbClient
        from mobilebert_kit.profiler.device import DeviceProfiler

        out = Path(f"{opts.out}.device-{_safe(serial)}.json")
        settings = {"serial": serial, "runs": self.runs, "warmup": DEFAULT_WARMUP, "threads": self.threads,
                    "trials": self.trials, "cores": "big"}
        inputs = {"mbk": mobilebert_kit.__version__, "artifact": file_hash(opts.out), "settings": settings}

        def work():
            profiler = DeviceProfiler(AdbClient(self.adb), serial, threads=self.threads, runs=self.runs,
                                      warmup=DEFAULT_WARMUP, min_time_s=0.0, trials=self.trials,
                                      benchmark_binary=self.benchmark_binary)
            results = profiler.profile_all([opts.out], [None])
            write_json(build_report(results, options={"pipeline": str(self.recipe_path), **settings}), out, overwrite=self.overwrite)

        self._stage(f"profile {Path(opts.out).name} on {serial}", StageManifest("profile-device", [out], inputs), work)
        return out

    def _check_device(self):
        """Checks the phone before any work, so a missing device fails in a second, not after the exports."""
        if not self.device:
            return None
        from mobilebert_kit.profiler.adb import AdbClient

        return AdbClient(self.adb).ready_serials([self.device])[0]


def _real_text(artifact, text, source):
    """``(RealText, None)``: ``text``'s sentences tokenized as ``artifact``'s app tokenizes them (with what the file
    carries, else the source checkpoint's own tokenizer, as ``mbk profile --text --tokenizer`` would); or
    ``(None, why)`` when neither has one (a preset's random weights come without a vocabulary)."""
    from mobilebert_kit.evaluation.artifact_metrics import app_tokenizer
    from mobilebert_kit.profiler.real_text import RealText

    graph, client = read_with_client_metadata(Path(artifact))
    meta, vocab = parse_mbk_metadata(graph.metadata, artifact)
    carried = carried_tokenizer(artifact, client, meta, vocab)
    if carried.runs_as == "graph":  # a text-in file: fed the sentences themselves
        return RealText.from_file(text, artifact, None), None
    tokenizer = None if carried.ready else _source_tokenizer(source)
    if not carried.ready and tokenizer is None:
        return None, (f"neither the file nor its source ({source}) carries a tokenizer to feed real sentences "
                      "with (a preset's random weights come without one); set [source] model or --source to a "
                      "checkpoint directory with its tokenizer")
    return RealText.from_file(text, artifact, app_tokenizer(artifact, tokenizer)), None


def _source_tokenizer(source):
    """The source checkpoint's directory when it holds a tokenizer (tokenizer.json or vocab.txt), else None: what a
    file that does not carry its app's tokenizer (RoBERTa's BPE) is fed with, as ``--tokenizer DIR`` would."""
    directory = classify(source).directory if source else None
    if directory is None or not any((directory / n).is_file() for n in ("tokenizer.json", "vocab.txt")):
        return None
    return directory


def _app_tokenizer_of(artifact, source):
    """``evaluate_artifact``'s ``tokenizer``: None where the file carries its app's, else the source's."""
    return None if carries_app_tokenizer(artifact) else _source_tokenizer(source)


def _check_vocabulary(recipe, planned):
    """Refuses, before any export, a recipe whose [evaluation] data or [profile] text (read here, named by its
    recipe key) its files could not tokenize: both read the vocabulary a file carries."""
    texts = (("[evaluation] data", next((opts.eval_data for opts in planned if opts.eval_data), None)),
             ("[profile] text", recipe.tables.get("profile", {}).get("text")))
    if texts[1][1]:
        from mobilebert_kit.profiler.real_text import read_lines

        read_lines(Path(check_input_path(texts[1][1], f"{recipe.path.name}: [profile] text")),
                   what=f"{recipe.path.name}: [profile] text")
    for table, data in texts:
        if data:
            _check_tokenizable(recipe, planned, f"{table} {Path(data).name}", table)


def _check_tokenizable(recipe, planned, named, table):
    where = f"{recipe.path.name}: {named} is tokenized with the vocabulary"
    if no_vocab := [opts for opts in planned if not opts.embed_vocab]:
        raise MbkError(f"{where} the exported files carry, and embed_vocab = false writes none "
                       f"({Path(no_vocab[0].out).name}); drop embed_vocab = false, or drop {table}")
    spec = planned[0].source
    if _source_tokenizer(spec) is None:
        what = f"the preset {spec} (random weights)" if classify(spec).kind == "preset" else f"the source {spec}"
        raise MbkError(f"{where} the exported files carry, but {what} has no vocab.txt or tokenizer.json; set "
                       f"[source] model (or --source) to a directory holding its tokenizer, or drop {table}")


def _float_baseline(opts):
    """The float32 export of the same source and shape: what "speed-up over float" divides by."""
    out = Path(opts.out)
    return dataclasses.replace(
        opts, quantize="none", out=str(out.with_name(f"{out.stem}-float32{out.suffix}")), calibration=None,
        drift_report=False, keep_float_ops=(), keep_float_layers=(), io_type="float32", thresholds={},
        max_drop=None,  # quantize = "auto"'s budget: no float export takes one
    )


def _option_inputs(opts):
    """The export options that change the artifact, with data files replaced by their content hashes."""
    data = dataclasses.asdict(opts)
    for key in ("source", "out"):
        data.pop(key)
    data["out_name"] = Path(opts.out).name
    for key in _FILE_OPTIONS:
        if data.get(key):
            data[key] = file_hash(data[key])
    return data


def _source_hash(spec):
    """Content hash of a model directory or TF1 checkpoint; a preset is its name (its weights come from a fixed seed)."""
    if locate(spec) != "path":  # a preset (an unknown name fails when the source loads)
        return {"preset": str(spec)}
    path = Path(spec)
    if path.exists():
        return {"path": str(path), "sha256": file_hash(path)}
    # A TF1 prefix names no file: its checkpoint is the files PREFIX.index, PREFIX.data-*.
    files = sorted(p for p in path.parent.glob(f"{path.name}.*") if p.is_file())
    return {"path": str(path), "sha256": {p.name: file_hash(p) for p in files}}


def _read_json(path):
    """A report the pipeline wrote; bounded and one-line if it was replaced by something else."""
    return load_json(Path(path), Path(path).name, expect=dict, error=MbkError, fix="run the pipeline again with --force")


def _safe(text):
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(text))


def _console():
    from rich.console import Console

    # Wide tables stay readable when stdout is a pipe or a CI log.
    return Console(width=None if sys.stdout.isatty() else 160)
