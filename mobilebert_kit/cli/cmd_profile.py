"""``mbk profile``: latency of .tflite / .onnx files on this host or an Android phone.

Only the model files, the standard library and the runtimes are needed: this
command never imports TensorFlow or the Keras model code.
"""

import os
import sys

from mobilebert_kit.artifacts.formats import SEQ_LEN, VOCAB_SIZE
from mobilebert_kit.errors import ConfigError, MbkError
from mobilebert_kit.profiler.errors import DeviceError, ProfilerError
from mobilebert_kit.profiler.result import PROFILE_LIMITS
from mobilebert_kit.utils.atomic import (
    UNCHECKED, OutputError, check_output, check_unchanged, file_signature, remove_path,
)
from mobilebert_kit.utils.output_check import OVERWRITE_HELP
from mobilebert_kit.utils.input_paths import input_path_option
from mobilebert_kit.utils.limits import number_option
from mobilebert_kit.utils.terminal import escape


def _seq_lens(text):
    """``"128,256"`` -> ``[128, 256]``, each checked like every other --seq-len; a length named twice is timed once
    (two rows of one length in a report read as two measurements of different things)."""
    one = number_option(SEQ_LEN)
    return list(dict.fromkeys(one(part) for part in str(text).split(",")))


def register(subparsers):
    parser = subparsers.add_parser(
        "profile",
        help="measure latency of .tflite/.onnx files on the host or a phone (adb)",
        description="Time .tflite/.onnx files with realistic BERT inputs. --target host runs ai-edge-litert / onnxruntime "
        "in this process, pinned to the chosen cores; --target adb runs LiteRT's benchmark_model on an Android phone "
        "with taskset, cooldown between trials and throttling checks. Reports: JSON (versioned), CSV, Markdown, HTML.",
    )
    parser.add_argument("files", nargs="*", type=input_path_option("file"), metavar="FILE", help=".tflite or .onnx model files")
    parser.add_argument("--target", choices=("host", "adb"), default="host", help="where to run (default host)")
    parser.add_argument("--serial", action="append", default=[], metavar="S",
                        help="device serial (adb); repeat or comma-separate to run several phones in parallel")
    parser.add_argument("--cores", default=None, metavar="SET",
                        help="big, little, prime, all, or a hex mask such as f0 (default: all on the host, big on a phone)")
    parser.add_argument("--threads", type=number_option(PROFILE_LIMITS["threads"]), default=1, help="inference threads (default 1: the paper's single big core)")
    parser.add_argument("--runs", type=number_option(PROFILE_LIMITS["runs"]), default=50, help="minimum timed runs (default 50)")
    parser.add_argument("--warmup", type=number_option(PROFILE_LIMITS["warmup"]), default=5, help="warm-up runs (default 5)")
    parser.add_argument("--min-time", type=number_option(PROFILE_LIMITS["min_time"]), default=None, metavar="S", help="minimum seconds of timed runs (default 1, or --max-time when shorter)")
    parser.add_argument("--max-time", type=number_option(PROFILE_LIMITS["max_time"]), default=150.0, metavar="S", help="stop starting runs after S seconds (default 150)")
    parser.add_argument("--seq-len", type=_seq_lens, default=None, metavar="N[,N...]",
                        help="sequence length(s) (default: the length fixed in the file, else the length its export planned, "
                             "else 128 within its position table)")
    parser.add_argument("--text", default=None, type=input_path_option("file"), metavar="FILE",
                        help="time real text: each sentence (line) of FILE, tokenized as the file's app tokenizes "
                        "it, one per call, at its own token count for a dynamic-length file and padded for a "
                        "static one (host only; with --seq-len, the fixed lengths are timed too); a text-in .onnx "
                        "(--tokenizer-in-graph) is fed the sentences themselves and timed on --text only")
    parser.add_argument("--tokenizer", default=None, type=input_path_option("any"), metavar="PATH",
                        help="--text: a vocab.txt or checkpoint directory, for a file that carries no tokenizer")
    parser.add_argument("--delegate", choices=("xnnpack", "none", "gpu", "nnapi"), default="xnnpack",
                        help="TFLite kernels: xnnpack (default), none (builtin kernels), gpu/nnapi (adb only)")
    parser.add_argument("--runtime", choices=("auto", "interpreter", "compiled-model"), default="auto",
                        help="host .tflite API: LiteRT's CompiledModel or its Interpreter; auto (default) takes "
                        "CompiledModel where it can run the file (static shapes) and says when it falls back")
    parser.add_argument("--inter-op-threads", type=number_option(PROFILE_LIMITS["inter_op_threads"]), default=1, help="ONNX Runtime inter-op threads (default 1)")
    parser.add_argument("--graph-opt", choices=("all", "extended", "basic", "disabled"), default="all",
                        help="ONNX Runtime graph optimisation level (default all)")
    parser.add_argument("--op-profile", action="store_true", help="add a per-op profile (ORT profiler / benchmark_model)")
    parser.add_argument("--benchmark-binary", default=None, type=input_path_option("file"), metavar="PATH",
                        help="LiteRT benchmark_model or benchmark_litert_model (adb: for the phone's ABI, either tool; "
                        "host: benchmark_model, enables TFLite op profiles)")
    parser.add_argument("--adb", default=None, type=input_path_option("file", or_name=True), metavar="PATH", help="adb client to use (default: adb on PATH)")
    parser.add_argument("--list-devices", action="store_true", help="list attached phones (model, SoC, Android, ABI) and exit")
    parser.add_argument("--trials", type=number_option(PROFILE_LIMITS["trials"]), default=3, help="benchmark_model invocations per model on a phone (default 3)")
    parser.add_argument("--cooldown-timeout", type=number_option(PROFILE_LIMITS["cooldown_timeout"]), default=120, metavar="S", help="longest wait for the phone to cool (default 120)")
    parser.add_argument("--cooldown-tolerance", type=number_option(PROFILE_LIMITS["cooldown_tolerance"]), default=2.0, metavar="C",
                        help="cool down to within C degrees of the starting temperature (default 2)")
    parser.add_argument("--poll", type=number_option(PROFILE_LIMITS["poll"]), default=2, metavar="S", help="temperature poll interval during cooldown (default 2)")
    parser.add_argument("--lock-freq", default=None, metavar="max|KHZ", help="pin the cores' frequency (root only)")
    parser.add_argument("--peak-memory", action="store_true", help="benchmark_model --report_peak_memory_footprint=true")
    parser.add_argument("--vocab-size", type=number_option(VOCAB_SIZE), default=None, help="token ids stay below this (default: read from the model)")
    parser.add_argument("--flops", type=number_option(PROFILE_LIMITS["flops"]), default=None, help="FLOPs per inference (default: counted from the model file)")
    parser.add_argument("--table6", action="store_true", help="print the paper's Table 6 layout (LayerNorm/GELU vs NoNorm/ReLU)")
    parser.add_argument("--json", default=None, metavar="OUT", help="write the JSON report")
    parser.add_argument("--csv", default=None, metavar="OUT", help="write a CSV table")
    parser.add_argument("--md", default=None, metavar="OUT", help="write a Markdown table")
    parser.add_argument("--html", default=None, metavar="OUT", help="write an HTML page with plots")
    parser.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    parser.set_defaults(func=run)


REPORT_FLAGS = ("json", "csv", "md", "html")


def _report_kinds():
    """Each report option and the output kind its writer declares (profiler/report.py, report_html.py)."""
    from mobilebert_kit.profiler.report import PROFILE_CSV, PROFILE_JSON, PROFILE_MD
    from mobilebert_kit.profiler.report_html import PROFILE_HTML

    return {"json": PROFILE_JSON, "csv": PROFILE_CSV, "md": PROFILE_MD, "html": PROFILE_HTML}


def run(args):
    if args.list_devices:
        return _list_devices(args)
    if not args.files:
        raise ProfilerError("no model file given; usage: mbk profile FILE [FILE...] --target host|adb")
    # A phone's options without --target adb would time this host under a command that names a phone.
    phone_only = [flag for flag, value in (("--serial", args.serial), ("--lock-freq", args.lock_freq)) if value]
    if args.target == "host" and phone_only:
        raise ProfilerError(f"{phone_only[0]} is an option of a phone, but this run times the host; add --target adb "
                            f"to time the phone, or drop {phone_only[0]}")
    # Checked before profiling: a refused --json /dev/null must not cost a two-minute run first.
    _check_distinct_reports(args)
    # Every input, not only the model files: --overwrite replaced the --text file with the report.
    sources = [*args.files, *(p for p in (args.text, args.tokenizer, args.benchmark_binary) if p)]
    for flag, kind in _report_kinds().items():
        if getattr(args, flag):
            check_output(getattr(args, flag), kind, overwrite=args.overwrite, sources=sources)
    # What each report path held when the run began: --overwrite replaces that, never a file another command
    # (an export's report, a second profile) put there while this one timed (_write_reports).
    args.began = {path: file_signature(path) for path in (getattr(args, flag) for flag in REPORT_FLAGS) if path}
    serials = [s.strip() for item in args.serial for s in item.split(",") if s.strip()]
    results, error = [], None
    try:
        results = _run_host(args) if args.target == "host" else _run_adb(args, serials)
    except MbkError as err:
        results = list(getattr(err, "partial_results", []) or [])
        if not results:
            raise
        error = err
    _emit(args, results, error)
    if error is not None:
        print(f"mbk profile: wrote the {len(results)} finished result(s) before the error", file=sys.stderr)
        raise error
    return 0


def _run_host(args):
    from mobilebert_kit.profiler.host import HostProfiler

    profiler = HostProfiler(
        cores=args.cores or "all",
        inter_op_threads=args.inter_op_threads,
        graph_optimization=args.graph_opt,
        runtime=args.runtime,
        **_timing_options(args),
    )
    results = []
    try:
        for path in args.files:
            if _takes_text(path, args):
                from mobilebert_kit.profiler.real_text import RealText
                results.append(profiler.profile_text(path, RealText.from_file(args.text, path, None)))
                continue
            if args.text:
                results.append(profiler.profile_text(path, _real_text(args, path)))
            for seq_len in args.seq_len or ([] if args.text else [None]):
                results.append(profiler.profile(path, seq_len=seq_len))
    except MbkError as err:
        err.partial_results = results
        raise
    return results


def _takes_text(path, args):
    """Whether ``path`` is a text-in ``.onnx`` (``--tokenizer-in-graph``), timed on ``--text`` only: token arrays
    of a made-up length are no input of it."""
    from mobilebert_kit.artifacts.metadata import read_artifact_metadata

    if not (str(path).endswith(".onnx") and isinstance(read_artifact_metadata(path).get("tokenizer_in_graph"), dict)):
        return False
    if not args.text or args.seq_len:
        raise ProfilerError(f"{path} takes text (its tokenizer runs inside it, --tokenizer-in-graph): time it on "
                            "sentences with --text FILE (one per line), without --seq-len")
    return True


def _real_text(args, path):
    """``--text``'s sentences as ``path``'s app tokenizes them (the packed vocabulary, as ``mbk evaluate`` reads it)."""
    from mobilebert_kit.evaluation.artifact_metrics import app_tokenizer
    from mobilebert_kit.profiler.real_text import RealText

    try:
        tokenizer = app_tokenizer(path, args.tokenizer)
    except MbkError as err:
        raise ProfilerError(f"--text {args.text}: {err}") from err
    return RealText.from_file(args.text, path, tokenizer)


def _run_adb(args, serials):
    from mobilebert_kit.profiler.adb import AdbClient

    if args.text:
        # benchmark_model feeds one fixed shape per run: a sentence per call is a host loop.
        raise ProfilerError("--text times real sentences on the host only; on a phone, time the text's lengths "
                            "with --seq-len (mbk profile --text FILE on the host prints their median and p90)")
    from mobilebert_kit.profiler.device import profile_devices

    adb = AdbClient(args.adb)
    serials = adb.ready_serials(serials)
    return profile_devices(
        adb,
        serials,
        args.files,
        args.seq_len or [None],
        cores=args.cores or "big",
        trials=args.trials,
        peak_memory=args.peak_memory,
        cooldown_timeout_s=args.cooldown_timeout,
        cooldown_tolerance_c=args.cooldown_tolerance,
        poll_s=args.poll,
        lock_freq=args.lock_freq,
        **_timing_options(args),
    )


def _timing_options(args):
    """The options the host and the phone take alike."""
    return dict(threads=args.threads, delegate=args.delegate, runs=args.runs, warmup=args.warmup,
                min_time_s=args.min_time, max_time_s=args.max_time, vocab_size=args.vocab_size,
                op_profile=args.op_profile, benchmark_binary=args.benchmark_binary, flops=args.flops)


def _emit(args, results, error):
    from rich.console import Console
    from rich.table import Table

    from mobilebert_kit.profiler.report import build_report, flat_rows

    options = {k: v for k, v in vars(args).items() if k not in ("func", "debug", "command", "began")}
    report = build_report(results, options=options, error=None if error is None else str(error))
    # Wide tables stay readable when stdout is a pipe or a CI log.
    console = Console(width=None if sys.stdout.isatty() else 200)
    table = Table(title="mbk profile" + (" [SIMULATED device]" if report["simulated"] else ""))
    for column in ("model", "precision", "variant", "target", "cores", "thr", "seq", "median ms", "p90 ms", "CV", "init ms", "peak MB", "GFLOP/s", "throttled"):
        table.add_column(column, justify="right" if column not in ("model", "precision", "variant", "target", "cores") else "left")

    def fmt(value, digits=3):
        return "n/a" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    for row in flat_rows(report):
        # Names come from files and the file system: escaped, so they can neither break the table nor be markup.
        table.add_row(
            *(escape(text, markup=True) for text in (row["model"], row["precision"], row["variant"],
                                                      f"{row['target']} {row['serial']}".strip(), f"{row['cores']} ({row['mask']})")),
            fmt(row["threads"]), row["seq"], fmt(row["median_ms"]), fmt(row["p90_ms"]), fmt(row["cv"]), fmt(row["init_ms"], 2),
            fmt(row["peak_rss_mb"], 1), fmt(row["gflops_per_s"], 2), "yes" if row["throttled"] else "no",
        )
    console.print(table)
    if args.table6:
        from mobilebert_kit.profiler.table6 import table6_markdown

        console.print(table6_markdown(report), markup=False)
    _write_reports(report, args)
    for path in (args.json, args.csv, args.md, args.html):
        if path:
            console.print(f"wrote {escape(path)}", markup=False)


def _write_reports(report, args):
    """Writes the reports asked for, all or none new: when one fails (a full disk at the HTML), those this run
    had already written at new paths are removed, so the error's "nothing was written" holds; they were left
    behind. A report that replaced an earlier one of ours cannot be taken back, and the error says so."""
    from mobilebert_kit.profiler.report import write_csv, write_json, write_markdown
    from mobilebert_kit.profiler.report_html import write_html
    from mobilebert_kit.profiler.table6 import table6_markdown

    extra = "\n" + table6_markdown(report) + "\n" if args.table6 else ""
    writers = [(args.json, lambda p: write_json(report, p, overwrite=args.overwrite)),
               (args.csv, lambda p: write_csv(report, p, overwrite=args.overwrite)),
               (args.md, lambda p: write_markdown(report, p, overwrite=args.overwrite, extra=extra)),
               (args.html, lambda p: write_html(report, p, overwrite=args.overwrite))]
    written = []
    for path, write in writers:
        if not path:
            continue
        existed = os.path.lexists(path)
        try:
            # Earlier reports of this run may be in place already: the except clause names what they replaced.
            check_unchanged(path, getattr(args, "began", {}).get(path, UNCHECKED), "this profile",
                            installed_nothing=False)
            write(path)
        except OutputError as err:
            replaced = [p for p, had in written if had]
            for p, had in written:
                if not had:
                    remove_path(p, ignore_errors=True)
            if replaced:
                raise OutputError(f"{err}; before it, this run had replaced {', '.join(map(str, replaced))}") from err
            raise
        written.append((path, existed))


def _check_distinct_reports(args):
    """Refuses two report options naming one file: the second report replaced the first, which was then
    left behind as a CSV named like the JSON (or the reverse)."""
    seen = {}
    for flag in REPORT_FLAGS:
        path = getattr(args, flag)
        if not path:
            continue
        key = os.path.realpath(path)
        if key in seen:
            raise ConfigError(f"--{seen[key]} and --{flag} both name {path}; give each report its own file")
        seen[key] = flag


def _list_devices(args):
    from rich.console import Console
    from rich.table import Table

    from mobilebert_kit.profiler.adb import AdbClient
    from mobilebert_kit.profiler.device import list_devices

    rows = list_devices(AdbClient(args.adb))
    if not rows:
        raise DeviceError(
            "no Android device found by adb; connect a phone with USB debugging on (Settings > Developer options) and check `adb devices`"
        )
    table = Table(title="Android devices")
    for column in ("serial", "state", "model", "SoC", "Android", "ABI"):
        table.add_column(column)
    for row in rows:
        soc = row.get("soc", "") + (" (SIMULATED)" if row.get("simulated") else "")
        table.add_row(row["serial"], row["state"], row.get("model", ""), soc, row.get("android", ""), row.get("abi", ""))
    Console(width=None if sys.stdout.isatty() else 160).print(table)
    return 0
