"""The output contract: every writing command × hostile file-system states at its output path.

A command may write a new path, replace an output of the same kind that mbk wrote (its marker), or fill
an empty directory; anything else is refused with one line (exit 2) and left byte-identical, unless
``--overwrite`` (never for the command's own input, a special file or a symbolic link). The rule is
``utils.atomic.check_output``; these tests drive it through each command's cheapest invocation.
"""

import errno
import importlib
import json
import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from tests.helpers import assert_one_line_error
from tests.reliability.faults import mbk_with_file_size_limit
from tests.reliability.test_bad_inputs import assert_refused

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "a", "mat", "dog", "ran", "."]
CORPUS = "the cat sat on a mat .\nthe dog ran .\n\na dog sat .\nthe cat ran on a mat .\n"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The commands' inputs, built once: a TF1 checkpoint, a corpus and vocabulary, a tiny .onnx, a recipe."""
    from tests.profiler.fixture_models import build_onnx_bert
    from tests.test_checkpoints import OFFICIAL_TINY, write_tf1_checkpoint

    root = tmp_path_factory.mktemp("contract_inputs")
    write_tf1_checkpoint(root / "ckpt", OFFICIAL_TINY)
    (root / "corpus.txt").write_text(CORPUS)
    (root / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (root / "train.tsv").write_text("sentence\tlabel\nthe cat\t0\nthe dog\t1\n")
    build_onnx_bert(root / "m.onnx", vocab_size=20, hidden=8, layers=1, seq_len=8)
    (root / "recipe").mkdir()
    (root / "recipe" / "r.toml").write_text('[source]\npreset = "tiny-mobilebert"\n\n[export]\nformats = ["onnx"]\n'
                                            'quantize = "none"\nseq_len = 8\nout_dir = "out"\nname = "r"\n')
    (root / "teacher").mkdir()
    (root / "data").mkdir()
    return root


# Each output kind's record, declared by the module that owns the format (issue 34 item 3: no table in utils/).
KIND_OWNERS = {
    "model": "mobilebert_kit.models.api:SAVED_MODEL",
    "pretraining-data": "mobilebert_kit.data.records:PRETRAINING_DATA",
    "stdlib-corpus": "mobilebert_kit.data.stdlib_corpus:STDLIB_CORPUS",
    "finetune": "mobilebert_kit.training.finetune_run:FINETUNE_OUTPUT",
    "substitute": "mobilebert_kit.convert.prepare.recovery_run:SUBSTITUTE_OUTPUT",
    "distill-run": "mobilebert_kit.training.run_directory:DISTILL_RUN",
    "pipeline": "mobilebert_kit.pipeline.report:PIPELINE_OUTPUT",
    "tflite": "mobilebert_kit.convert.tflite.writer:TFLITE_OUTPUT",
    "onnx": "mobilebert_kit.convert.onnx.writer:ONNX_OUTPUT",
    "export-report": "mobilebert_kit.convert.export_report:EXPORT_REPORT_OUTPUT",
    "profile-json": "mobilebert_kit.profiler.report:PROFILE_JSON",
    "profile-csv": "mobilebert_kit.profiler.report:PROFILE_CSV",
    "profile-md": "mobilebert_kit.profiler.report:PROFILE_MD",
    "profile-html": "mobilebert_kit.profiler.report_html:PROFILE_HTML",
    "pipeline-json": "mobilebert_kit.pipeline.report:PIPELINE_JSON",
    "pipeline-html": "mobilebert_kit.pipeline.report:PIPELINE_HTML",
    "evaluation-json": "mobilebert_kit.pipeline.report:EVALUATION_JSON",
}


def owned_kind(name):
    """The :class:`~mobilebert_kit.utils.output_check.OutputKind` of ``name``, from its owner's module."""
    module, constant = KIND_OWNERS[name].split(":")
    return getattr(importlib.import_module(module), constant)


@dataclass(frozen=True)
class Command:
    """One writing command: its cheapest invocation writing ``out``, its input, and its output kind."""

    name: str
    argv: Callable  # (inputs, out) -> argument list
    source: Callable  # inputs -> the input path that must never be written
    is_dir: bool
    kind: str
    cheap: bool  # a successful run takes seconds: the replace/--overwrite cases run it


COMMANDS = [
    Command("import", lambda i, out: ["import", i / "ckpt", "--out", out], lambda i: i / "ckpt", True, "model", True),
    Command("pretraining-data", lambda i, out: ["pretraining-data", "--input", i / "corpus.txt", "--vocab",
                                                i / "vocab.txt", "--out", out, "--seq-len", 16, "--shards", 1],
            lambda i: i / "corpus.txt", True, "pretraining-data", True),
    Command("finetune", lambda i, out: ["finetune", "--model", "tiny-mobilebert", "--task", "classification",
                                        "--train", i / "train.tsv", "--vocab", i / "vocab.txt", "--out", out],
            lambda i: i / "train.tsv", True, "finetune", False),
    Command("substitute", lambda i, out: ["substitute", "tiny-mobilebert", "--norm", "no_norm", "--data",
                                          i / "corpus.txt", "--out", out],
            lambda i: i / "corpus.txt", True, "substitute", False),
    Command("distill", lambda i, out: ["distill", "--teacher", i / "teacher", "--student", "tiny-mobilebert",
                                       "--data", i / "data", "--out", out],
            lambda i: i / "teacher", True, "distill-run", False),
    Command("quickstart", lambda i, out: ["quickstart", "--out", out], lambda i: None, True, "model", False),
    Command("pipeline", lambda i, out: ["pipeline", i / "recipe" / "r.toml", "--out", out],
            lambda i: i / "recipe" / "r.toml", True, "pipeline", False),
    Command("export", lambda i, out: ["export", "tiny-mobilebert", "--format", "onnx", "--seq-len", 8,
                                      "--no-validate", "--out", out], lambda i: None, False, "onnx", True),
    Command("profile", lambda i, out: ["profile", i / "m.onnx", "--runs", 1, "--warmup", 1, "--min-time", 0,
                                       "--json", out], lambda i: i / "m.onnx", False, "profile-json", True),
]
IDS = [c.name for c in COMMANDS]


def _out_name(command):
    return "out.onnx" if command.kind == "onnx" else "out.json" if not command.is_dir else "out"


def _snapshot(path):
    """Every byte and mode under ``path`` (without following links), to prove it was left alone."""
    path = Path(path)
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        return {p.relative_to(path).as_posix(): _snapshot(p) for p in path.iterdir()} | {".": st.st_mode}
    if stat.S_ISREG(st.st_mode):
        return (st.st_mode, path.read_bytes())
    return (st.st_mode, os.readlink(path) if stat.S_ISLNK(st.st_mode) else st.st_rdev)


def _partials(*roots):
    return [p for root in roots for p in Path(root).rglob("*") if p.name.endswith((".partial", ".old"))]


# --- hostile states: each returns the output path and the thing that must survive -----------------------------

def _user_dir(tmp, command, inputs):
    out = tmp / _out_name(command)
    out.mkdir()
    (out / "canary.txt").write_text("the user's own file\n")
    return out, out


def _other_kind_file(tmp, command, inputs):
    out = tmp / _out_name(command)
    out.write_text('{"a user\'s": "notes"}\n')
    return out, out


def _fifo(tmp, command, inputs):
    out = tmp / _out_name(command)
    os.mkfifo(out)
    return out, out


def _symlink(tmp, command, inputs):
    target = tmp / "target"
    target.write_text("the link's target\n")
    out = tmp / _out_name(command)
    out.symlink_to(target)
    return out, target


def _char_device(tmp, command, inputs):
    if os.geteuid() != 0:
        pytest.skip("mknod needs root (the decision on /dev/null is tested without writing)")
    out = tmp / _out_name(command)
    os.mknod(out, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return out, out


def _parent_is_file(tmp, command, inputs):
    parent = tmp / "a-file"
    parent.write_text("not a directory\n")
    return parent / _out_name(command), parent


def _source_itself(tmp, command, inputs):
    return command.source(inputs), command.source(inputs)


def _contains_source(tmp, command, inputs):
    return command.source(inputs).parent, command.source(inputs).parent


def _trailing_slash(tmp, command, inputs):
    # `--out x.onnx/` named a directory, and the file x.onnx was written (a Path drops the '/').
    return f"{tmp / _out_name(command)}{os.sep}", tmp


STATES = {  # name: (make, applies to, refused even with --overwrite, message fragment)
    "trailing-slash": (_trailing_slash, lambda c: not c.is_dir, True, "names a directory"),
    "user-dir": (_user_dir, lambda c: c.is_dir, False, "not written by mbk"),
    "dir-where-file-expected": (_user_dir, lambda c: not c.is_dir, False, "is a directory"),
    "file-of-another-kind": (_other_kind_file, lambda c: True, False, "--overwrite"),
    "fifo": (_fifo, lambda c: True, True, "FIFO"),
    "symlink": (_symlink, lambda c: True, True, "symbolic link"),
    "char-device": (_char_device, lambda c: True, True, "character device"),
    "parent-is-file": (_parent_is_file, lambda c: True, True, "is not a directory"),
    "source-itself": (_source_itself, lambda c: c.source(Path()) is not None, True, "input"),
    "contains-source": (_contains_source, lambda c: c.is_dir and c.source(Path()) is not None, True, "input"),
}
CASES = [pytest.param(c, s, id=f"{c.name}-{s}") for c in COMMANDS for s, state in STATES.items() if state[1](c)]


@pytest.mark.parametrize("command, state", CASES)
def test_hostile_output_paths_are_refused_and_left_intact(mbk, inputs, tmp_path, command, state):
    make, _, always, fragment = STATES[state]
    out, kept = make(tmp_path, command, inputs)
    before = _snapshot(kept)
    inputs_before = _snapshot(inputs)
    line = assert_refused(mbk(*command.argv(inputs, out)), fragment)
    assert str(out) in line or str(Path(out).parent) in line
    assert _snapshot(kept) == before
    assert _snapshot(inputs) == inputs_before
    assert _partials(tmp_path, inputs) == []
    if always:  # --overwrite replaces what is not ours, never these
        assert_refused(mbk(*command.argv(inputs, out), "--overwrite"), fragment)
        assert _snapshot(kept) == before and _snapshot(inputs) == inputs_before


def _own_previous_output(command, out):
    """What an earlier run of the command left at ``out`` (its marker or its kind's content) plus a stale file."""
    from mobilebert_kit.utils.atomic import MARKER_FILE

    if command.is_dir:
        out.mkdir()
        (out / MARKER_FILE).write_text(json.dumps({"format": owned_kind(command.kind).format, "version": 1}))
        (out / "stale.txt").write_text("from the previous run\n")
    elif command.kind == "onnx":
        out.write_bytes(b"\x08\x08\x12\x07tf2onnx" + b"mbk_metadata" + b"stale")
    else:
        out.write_text(json.dumps({"schema": "mobilebert_kit.profile", "stale": True}))


def _assert_written(command, out):
    assert owned_kind(command.kind).recognises(out), f"{out} is not recognised as {command.kind}"
    umask = os.umask(0)
    os.umask(umask)
    paths = [out, *Path(out).rglob("*")] if command.is_dir else [out]
    for path in paths:
        want = (0o777 if path.is_dir() else 0o666) & ~umask
        assert stat.S_IMODE(os.stat(path).st_mode) == want, f"{path}: {oct(os.stat(path).st_mode)}"


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.cheap], ids=[c.name for c in COMMANDS if c.cheap])
def test_own_previous_output_is_replaced(mbk, inputs, tmp_path, command):
    out = tmp_path / _out_name(command)
    _own_previous_output(command, out)
    proc = mbk(*command.argv(inputs, out))
    assert proc.returncode == 0, proc.stderr
    _assert_written(command, out)
    assert not (out / "stale.txt").exists() if command.is_dir else b"stale" not in out.read_bytes()
    assert _partials(tmp_path) == []


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.cheap], ids=[c.name for c in COMMANDS if c.cheap])
def test_overwrite_replaces_what_is_not_ours(mbk, inputs, tmp_path, command):
    out, _ = (_user_dir if command.is_dir else _other_kind_file)(tmp_path, command, inputs)
    proc = mbk(*command.argv(inputs, out), "--overwrite")
    assert proc.returncode == 0, proc.stderr
    _assert_written(command, out)
    assert not (out / "canary.txt").exists() if command.is_dir else b"notes" not in out.read_bytes()
    assert _partials(tmp_path) == []


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.cheap], ids=[c.name for c in COMMANDS if c.cheap])
def test_a_private_output_stays_private_when_replaced(mbk, inputs, tmp_path, command):
    # A replaced output got the umask's 0755 / 0644: a 0700 directory or 0600 file the user had closed opened
    # to everyone (issue 9's probe, session 12).
    out = tmp_path / _out_name(command)
    _own_previous_output(command, out)
    private = 0o700 if command.is_dir else 0o600
    os.chmod(out, private)
    proc = mbk(*command.argv(inputs, out))
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(os.stat(out).st_mode) == private
    user = tmp_path / "user" / _out_name(command)
    user.parent.mkdir()
    user.mkdir() if command.is_dir else user.write_text("notes\n")
    os.chmod(user, private)
    proc = mbk(*command.argv(inputs, user), "--overwrite")
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(os.stat(user).st_mode) == private


def test_save_fills_an_empty_directory_and_refuses_a_users(tmp_path):
    import mobilebert_kit as mbk
    from mobilebert_kit.utils.atomic import OutputError

    model = mbk.build("tiny-bert")
    (tmp_path / "empty").mkdir()
    mbk.save(model, tmp_path / "empty")
    _assert_written(COMMANDS[0], tmp_path / "empty")
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="pass --overwrite"):
        mbk.save(model, tmp_path / "user")
    assert (tmp_path / "user" / "notes.txt").read_text() == "mine"


def test_a_model_saved_before_markers_existed_is_replaced_only_with_overwrite(tmp_path):
    # Older saved models have no .mbk-output.json. utils/atomic.py used to recognise them by the saved-model
    # format's own config.json (issue 34 item 3: the ground floor knew every format); now a directory is ours
    # only by its marker, and an old one is replaced with --overwrite like any other.
    import mobilebert_kit as mbk
    from mobilebert_kit.models.api import CONFIG_FILE, FORMAT
    from mobilebert_kit.utils.atomic import OutputError

    out = tmp_path / "old"
    out.mkdir()
    (out / CONFIG_FILE).write_text(json.dumps({"format": FORMAT, "format_version": 1}))
    (out / "stale.txt").write_text("x")
    before = _snapshot(out)
    with pytest.raises(OutputError, match="not written by mbk as a saved model directory .*pass --overwrite"):
        mbk.save(mbk.build("tiny-bert"), out)
    assert _snapshot(out) == before
    mbk.save(mbk.build("tiny-bert"), out, overwrite=True)
    assert not (out / "stale.txt").exists() and mbk.load(out) is not None
    mbk.save(mbk.build("tiny-bert"), out)  # marked now: the next save replaces it without --overwrite


def test_profile_refuses_dev_null_before_profiling(mbk, inputs):
    line = assert_refused(mbk("profile", inputs / "m.onnx", "--html", "/dev/null", "--overwrite"), "character device")
    assert "/dev/null" in line and stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_profile_never_overwrites_its_text_or_tokenizer_input(mbk, inputs, tmp_path):
    # --overwrite replaced the --text file (or the --tokenizer vocabulary) with the report: only FILEs were inputs.
    text = tmp_path / "text.txt"
    text.write_text("the cat sat .\n")
    for flag, path in (("--json", text), ("--md", inputs / "vocab.txt")):
        assert_refused(mbk("profile", inputs / "m.onnx", "--text", text, "--tokenizer", inputs / "vocab.txt",
                           flag, path, "--overwrite"), "the command's input")
    assert text.read_text() == "the cat sat .\n" and (inputs / "vocab.txt").read_text() == "\n".join(VOCAB) + "\n"


@pytest.mark.parametrize("out", ["--out", "--stdlib-corpus"])
def test_pretraining_data_never_overwrites_the_directory_holding_its_vocabulary(mbk, inputs, tmp_path, out):
    # --out DIR --overwrite replaced DIR, the user's vocab.txt inside it with it: only --input files were inputs.
    (tmp_path / "d").mkdir()
    vocab = tmp_path / "d" / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n")
    args = ["--input", inputs / "corpus.txt", "--out", tmp_path / "d"] if out == "--out" else \
        ["--stdlib-corpus", tmp_path / "d", "--out", tmp_path / "o"]
    assert_refused(mbk("pretraining-data", *args, "--vocab", vocab, "--seq-len", 16, "--overwrite"),
                   "contains the command's input")
    assert vocab.read_text() == "\n".join(VOCAB) + "\n" and sorted(os.listdir(tmp_path)) == ["d"]


# --- write errors ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("code, fragment", [(errno.EACCES, "permission denied"), (errno.EROFS, "read-only"),
                                            (errno.ENOSPC, "disk full"), (errno.EDQUOT, "disk full"),
                                            (errno.EFBIG, "file size limit"), (errno.ENAMETOOLONG, "too long")])
def test_write_errors_are_one_line_naming_the_path(mbk, inputs, tmp_path, monkeypatch, code, fragment):
    # Tests run as root, where a read-only directory is writable: the errno is injected where the writer
    # creates its temporary file.
    from mobilebert_kit.utils import atomic

    def failing(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(atomic.tempfile, "mkstemp", failing)
    out = tmp_path / "r.json"
    line = assert_refused(mbk("profile", inputs / "m.onnx", "--runs", 1, "--warmup", 1, "--min-time", 0, "--json", out),
                    fragment)
    assert str(out) in line
    assert list(tmp_path.iterdir()) == []


def test_a_long_name_is_one_line(mbk, inputs, tmp_path):
    out = tmp_path / ("x" * 300)
    assert_refused(mbk("import", inputs / "ckpt", "--out", out), "too long")
    assert list(tmp_path.iterdir()) == []


def test_file_size_limit_while_writing_the_profile_html(inputs, tmp_path):
    # With the small reports before it (--json, --csv, --md), they were left behind under "nothing was written".
    out = tmp_path / "r.html"
    proc = mbk_with_file_size_limit(2000, "profile", inputs / "m.onnx", "--runs", 1, "--warmup", 1, "--min-time", 0,
                                    "--html", out)
    assert proc.returncode == 2, proc.stderr
    assert_one_line_error(proc, "file size limit reached while writing", str(out))
    assert list(tmp_path.iterdir()) == []
    reports = ["--json", tmp_path / "r.json", "--csv", tmp_path / "r.csv", "--md", tmp_path / "r.md"]
    proc = mbk_with_file_size_limit(20000, "profile", inputs / "m.onnx", "--runs", 1, "--warmup", 1, "--min-time", 0,
                                    *reports, "--html", out)  # the JSON is ~6 kB, the HTML ~46 kB
    assert_one_line_error(proc, "file size limit reached while writing", str(out), "(nothing was written)")
    assert list(tmp_path.iterdir()) == []


# --- the decision function -------------------------------------------------------------------------------------

def test_decision_new_replace_empty_overwrite(tmp_path):
    from mobilebert_kit.utils.atomic import check_output

    assert check_output(tmp_path / "new", owned_kind("model")) == "new"
    assert check_output(tmp_path / "deep" / "er" / "new.json", owned_kind("profile-json")) == "new"
    (tmp_path / "empty").mkdir()
    assert check_output(tmp_path / "empty", owned_kind("finetune")) == "empty"
    (tmp_path / "r.json").write_text(json.dumps({"schema": "mobilebert_kit.profile"}))
    assert check_output(tmp_path / "r.json", owned_kind("profile-json")) == "replace"
    assert check_output(tmp_path / "r.json", owned_kind("pipeline-json"), overwrite=True) == "overwrite"


def test_decision_refuses_a_file_path_that_names_a_directory(tmp_path):
    from mobilebert_kit.utils.atomic import OutputError, check_output, write_text

    for tail in ("/", "/."):
        with pytest.raises(OutputError, match=f"ends in '{tail}', which names a directory.*drop the '{tail}'"):
            write_text(f"{tmp_path}/r.json{tail}", "{}", kind=owned_kind("profile-json"))
    assert list(tmp_path.iterdir()) == []
    assert check_output(f"{tmp_path}/run/", owned_kind("model")) == "new"  # a directory's name may end in '/'


def test_decision_takes_the_owners_record_not_a_name(tmp_path):
    from mobilebert_kit.utils.atomic import atomic_dir, check_output

    with pytest.raises(TypeError, match="pass the record its owner declares"):
        check_output(tmp_path / "new", "model")
    with pytest.raises(TypeError, match="pass the record its owner declares"):
        with atomic_dir(tmp_path / "new", "model"):
            pass
    assert list(tmp_path.iterdir()) == []


def test_decision_writes_to_find_out_whether_a_new_path_can_be_written(tmp_path, monkeypatch):
    # root passes os.access on an immutable (chattr +i) directory or a read-only bind mount: `mbk substitute`
    # ran its whole recovery and only then failed to write its output. The decision now writes (and removes) a
    # probe in the nearest existing directory.
    import tempfile

    from mobilebert_kit.utils.atomic import OutputError, check_output

    assert check_output(tmp_path / "a" / "b" / "new", owned_kind("model")) == "new" and list(tmp_path.iterdir()) == []
    real = tempfile.mkstemp

    def refused(*args, **kwargs):
        if kwargs.get("dir") == tmp_path:
            raise OSError(errno.EPERM, "Operation not permitted")
        return real(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    with pytest.raises(OutputError, match="cannot write .*new: permission denied or read-only file system"):
        check_output(tmp_path / "new", owned_kind("model"))


@pytest.mark.parametrize("path", ["/dev/null", "/dev/zero"])
@pytest.mark.parametrize("kind", ["model", "profile-json", "tflite"])
def test_decision_never_writes_a_device_node(path, kind):
    from mobilebert_kit.utils.atomic import OutputError, check_output

    with pytest.raises(OutputError, match="character device"):
        check_output(path, owned_kind(kind), overwrite=True)


def test_decision_refuses_a_kind_marked_as_another(tmp_path):
    from mobilebert_kit.utils.atomic import MARKER_FILE, OutputError, check_output

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / MARKER_FILE).write_text(json.dumps({"format": "mobilebert-kit/distill-run", "version": 1}))
    assert check_output(tmp_path / "run", owned_kind("distill-run")) == "replace"
    with pytest.raises(OutputError, match="not written by mbk"):
        check_output(tmp_path / "run", owned_kind("model"))


def test_decision_refuses_the_source_inside_and_around(tmp_path):
    from mobilebert_kit.utils.atomic import OutputError, check_output

    src = tmp_path / "ckpt"
    src.mkdir()
    (src / "model.index").write_text("x")
    for out, relation in ((src, "is the"), (src / "sub", "is inside"), (tmp_path, "contains"),
                          (src / "model", "is inside")):
        with pytest.raises(OutputError, match=relation):
            check_output(out, owned_kind("model"), overwrite=True, sources=[src])
    with pytest.raises(OutputError, match="contains"):  # a TF1 prefix stands for its .index file
        check_output(tmp_path, owned_kind("model"), overwrite=True, sources=[src / "model"])
    # A preset is no path.
    assert check_output(tmp_path / "other", owned_kind("model"), sources=[src, "tiny-bert"]) == "new"


def test_decision_refuses_the_source_under_another_name(tmp_path):
    # A hard link, or a bind mount of the input's directory, names the input by another path: realpath does
    # not see it, and --overwrite of the alias replaced the input (issue 9's probe, session 12).
    from mobilebert_kit.utils.atomic import OutputError, check_output

    src = tmp_path / "data"
    src.mkdir()
    (src / "m.onnx").write_bytes(b"model")
    os.link(src / "m.onnx", tmp_path / "alias.onnx")
    with pytest.raises(OutputError, match="is the command's input"):
        check_output(tmp_path / "alias.onnx", owned_kind("profile-json"), overwrite=True, sources=[src / "m.onnx"])
    alias = tmp_path / "alias"
    alias.mkdir()
    if subprocess.run(["mount", "--bind", src, alias], capture_output=True).returncode != 0:
        return  # bind mounts need root; the hard link above is the same check
    try:
        for out, source, relation in ((alias, src, "is the"), (alias / "x", src, "is inside"),
                                      (alias / "m.onnx", src / "m.onnx", "is the")):
            with pytest.raises(OutputError, match=relation):
                check_output(out, owned_kind("model"), overwrite=True, sources=[source])
        with pytest.raises(OutputError, match="contains"):
            check_output(alias, owned_kind("model"), overwrite=True, sources=[src / "m.onnx"])
    finally:
        subprocess.run(["umount", alias], capture_output=True)
    assert check_output(tmp_path / "other", owned_kind("model"), sources=[src]) == "new"


def test_sniffs_recognise_what_the_writers_write(tmp_path):
    from mobilebert_kit.pipeline import report as pipeline_report
    from mobilebert_kit.pipeline import runner
    from mobilebert_kit.profiler.report import SCHEMA, build_report, to_csv, to_markdown
    from mobilebert_kit.profiler.report_html import PROFILE_HTML
    from mobilebert_kit.utils.output_check import generator_meta

    (tmp_path / "r.csv").write_text(to_csv(build_report([])))
    (tmp_path / "r.md").write_text(to_markdown(build_report([])))
    (tmp_path / "r.html").write_text(f"<!DOCTYPE html><html><head>{generator_meta(PROFILE_HTML.name)}</head></html>")
    (tmp_path / "r.json").write_text(json.dumps({"schema": SCHEMA}))
    (tmp_path / "e.json").write_text(json.dumps({"schema": runner.EVALUATION_SCHEMA}))
    assert owned_kind("profile-csv").recognises(tmp_path / "r.csv")
    assert owned_kind("profile-md").recognises(tmp_path / "r.md")
    assert owned_kind("profile-html").recognises(tmp_path / "r.html")
    assert not owned_kind("pipeline-html").recognises(tmp_path / "r.html")
    assert owned_kind("profile-json").recognises(tmp_path / "r.json")
    assert not owned_kind("pipeline-json").recognises(tmp_path / "r.json")
    assert owned_kind("evaluation-json").recognises(tmp_path / "e.json")
    assert pipeline_report.EVALUATION_SCHEMA == runner.EVALUATION_SCHEMA  # the runner writes what the kind reads


def test_every_kind_is_declared_once_by_its_owner():
    kinds = {name: owned_kind(name) for name in KIND_OWNERS}
    assert all(kind.name == name for name, kind in kinds.items())
    assert len({kind.format for kind in kinds.values()}) == len(kinds)


def test_the_ground_floor_names_no_format_of_the_floors_above():
    # Issue 34 item 3: utils/atomic.py hard-coded report schemas, CSV headers, task.json, run.json, ...; a
    # changed header in profiler/report.py made the next run refuse its own file. The mechanism names none.
    from mobilebert_kit.utils import atomic, output_check

    formats = ["mobilebert_kit.profile", "mobilebert_kit.pipeline", "mobilebert_kit.export", "mobilebert_kit.evaluation",
               "mobilebert-kit-pretraining", '"mobilebert-kit"', "model,format", "mbk profile",
               "mbk pipeline", "task.json", "run.json", "config.json", "dataset.json", "substitution.json",
               ".stage.json", "mbk_metadata", "TFL3", "<title>"]
    for module in (atomic, output_check):
        source = Path(module.__file__).read_text()
        found = [literal for literal in formats if literal in source]
        assert not found, f"{module.__name__} names formats owned above it: {found}"
    assert not hasattr(atomic, "OUTPUT_KINDS") and not hasattr(output_check, "OUTPUT_KINDS")


def test_a_directory_kind_is_recognised_by_its_marker_only(tmp_path):
    from mobilebert_kit.utils.output_check import MARKER_FILE, OutputKind

    with pytest.raises(ValueError, match="marker only"):
        OutputKind("x", True, "an x directory", lambda path: True)
    with pytest.raises(ValueError, match="recogniser"):
        OutputKind("x", False, "an x file")
    (tmp_path / "finetune").mkdir()
    (tmp_path / "finetune" / "task.json").write_text("{}")  # what recognised a fine-tune before markers
    (tmp_path / "finetune" / "model").mkdir()
    assert not owned_kind("finetune").recognises(tmp_path / "finetune")
    (tmp_path / "finetune" / MARKER_FILE).write_text(json.dumps({"format": owned_kind("finetune").format}))
    assert owned_kind("finetune").recognises(tmp_path / "finetune")
    assert not owned_kind("substitute").recognises(tmp_path / "finetune")


def test_the_profiler_has_no_second_writer():
    import mobilebert_kit.profiler.report as report

    assert not hasattr(report, "atomic_write")


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_signal_during_the_final_swap_never_leaves_the_path_empty(tmp_path, monkeypatch, signal_name):
    # The old output is moved aside, then the new one moved in: a Ctrl-C or SIGTERM between the two renames
    # must not leave neither at the path (and must not let the clean-up delete the old one).
    import signal

    from mobilebert_kit.utils.atomic import atomic_dir

    model = owned_kind("model")
    out = tmp_path / "out"
    with atomic_dir(out, model) as tmp:
        (tmp / "config.json").write_text('{"v": "old"}')
    real_replace, calls = os.replace, []

    def replace(src, dst):
        real_replace(src, dst)
        calls.append(dst)
        if len(calls) == 1:  # the old output has just been moved aside
            os.kill(os.getpid(), getattr(signal, signal_name))

    # Both signals raise KeyboardInterrupt here, as the training loops take them. (A process started in the
    # background by a shell, as CI is, begins with SIGINT ignored: Python then installs no handler for it.)
    previous = {n: signal.signal(n, signal.default_int_handler) for n in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setattr(os, "replace", replace)
    try:
        with pytest.raises(KeyboardInterrupt):
            with atomic_dir(out, model) as tmp:
                (tmp / "config.json").write_text('{"v": "new"}')
    finally:
        monkeypatch.undo()
        for number, handler in previous.items():
            signal.signal(number, handler)
    assert len(calls) == 2, calls  # the swap finished before the signal was delivered
    assert json.loads((out / "config.json").read_text()) == {"v": "new"}
    assert not [p for p in tmp_path.iterdir() if p.name != "out"], list(tmp_path.iterdir())


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.cheap and c.is_dir],
                         ids=[c.name for c in COMMANDS if c.cheap and c.is_dir])
def test_a_users_file_put_into_our_output_is_never_deleted_by_a_rerun(mbk, inputs, tmp_path, command):
    out = tmp_path / _out_name(command)
    first = mbk(*command.argv(inputs, out))
    assert first.returncode == 0, first.stderr
    inner = [p for p in sorted(out.rglob("*")) if p.is_dir() and not p.name.startswith(".")][:1]  # deeper too
    for where in [out, *inner]:
        (where / "notes.txt").write_text("mine\n")
    before = _snapshot(out)
    line = assert_refused(mbk(*command.argv(inputs, out)), "notes.txt")
    assert str(out) in line and "--overwrite" in line
    assert _snapshot(out) == before and _partials(tmp_path, inputs) == []
    proc = mbk(*command.argv(inputs, out), "--overwrite")  # the user's explicit choice
    assert proc.returncode == 0, proc.stderr
    _assert_written(command, out)
    assert not (out / "notes.txt").exists()


def test_save_refuses_to_replace_its_own_model_holding_a_users_file(tmp_path):
    import mobilebert_kit as mbk
    from mobilebert_kit.utils.atomic import OutputError

    model = mbk.build("tiny-bert")
    mbk.save(model, tmp_path / "m")
    mbk.save(model, tmp_path / "m")  # our own files only: replaced
    (tmp_path / "m" / "exported.tflite").write_bytes(b"the user's")
    with pytest.raises(OutputError, match="exported.tflite"):
        mbk.save(model, tmp_path / "m")
    assert (tmp_path / "m" / "exported.tflite").read_bytes() == b"the user's"
    mbk.save(model, tmp_path / "m", overwrite=True)
    assert not (tmp_path / "m" / "exported.tflite").exists()


def test_files_mbk_adds_beside_a_saved_model_are_listed_as_its_own(tmp_path):
    # The distiller copies the teacher's vocabulary and pooling beside the saved student; a --resume replaced
    # them and must keep doing so, while a user's file there is still refused.
    import mobilebert_kit as mbk
    from mobilebert_kit.utils.atomic import OutputError, relist

    model = mbk.build("tiny-bert")
    mbk.save(model, tmp_path / "m")
    (tmp_path / "m" / "vocab.txt").write_text("[PAD]\n")
    relist(tmp_path / "m")
    mbk.save(model, tmp_path / "m")
    (tmp_path / "m" / "mine.txt").write_text("x")
    with pytest.raises(OutputError, match="mine.txt"):
        mbk.save(model, tmp_path / "m")


def test_recognising_an_output_that_is_cut_meanwhile_never_kills_the_command(tmp_path):
    """The check of an existing ``.tflite``/``.onnx`` at ``--out`` (is it ours?) memory-mapped the file to find our
    metadata in it: a file truncated in place meanwhile (a re-export or a copy into the same name) killed the
    command with SIGBUS, exit 135 and no message. It is read now. Real truncations, from another process, while
    a child process checks the file again and again."""
    import sys
    import time

    from tests.reliability.faults import REPO, _env

    model = tmp_path / "m.tflite"
    size = 32 << 20
    with open(model, "wb") as handle:
        handle.write(b"\0\0\0\0TFL3")  # a flatbuffer's identifier: the check goes on to look for our metadata
        handle.truncate(size)
    # The sniff the .tflite and .onnx kinds use (their modules import TensorFlow: seconds of the child's time).
    script = ("import sys, time\n"
              "from mobilebert_kit.utils.output_check import contains\n"
              "sniff, end = contains(b'mbk_metadata'), time.monotonic() + 2\n"
              "while time.monotonic() < end:\n"
              "    sniff(sys.argv[1])\n"
              "print('checked')\n")
    child = subprocess.Popen([sys.executable, "-c", script, str(model)], cwd=REPO, env=_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while child.poll() is None:
        os.truncate(model, 4096)
        time.sleep(0.002)
        os.truncate(model, size)
        time.sleep(0.005)
    out, err = child.communicate()
    assert child.returncode == 0 and out.strip() == "checked", (child.returncode, err[-500:])


def test_profile_overwrite_refuses_a_report_another_command_wrote_while_it_timed(mbk, inputs, tmp_path, monkeypatch):
    """--overwrite replaces what was at the report path when the profile began; an export's report that appeared
    there while it timed was replaced silently (both commands said "wrote"). One line, exit 2, the other's file
    kept."""
    from mobilebert_kit.profiler.host import HostProfiler

    out = tmp_path / "m.onnx.report.json"
    theirs = b'{"schema": "mobilebert_kit.export"}\n'  # what `mbk export --out m.onnx` writes beside its file
    real_profile = HostProfiler.profile

    def profile_while_an_export_installs(self, *args, **kwargs):
        out.write_bytes(theirs)
        return real_profile(self, *args, **kwargs)

    monkeypatch.setattr(HostProfiler, "profile", profile_while_an_export_installs)
    proc = mbk("profile", inputs / "m.onnx", "--runs", 2, "--warmup", 1, "--json", out, "--overwrite")
    assert_one_line_error(proc, f"another command wrote {out} while this profile ran", "run again")
    assert proc.returncode == 2 and out.read_bytes() == theirs
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_pretraining_data_refuses_an_output_another_command_wrote_while_it_ran(mbk, inputs, tmp_path, monkeypatch):
    # Two runs into one --out (other corpora or seeds) both said "wrote N examples", one silently replaced.
    from mobilebert_kit.data import pretraining_examples
    from mobilebert_kit.data.records import PRETRAINING_DATA

    out = tmp_path / "out"
    real_read = pretraining_examples.read_documents

    def read_while_another_installs(*args, **kwargs):
        out.mkdir()  # the other run's output, installed while this one tokenized
        (out / ".mbk-output.json").write_text(json.dumps({"format": PRETRAINING_DATA.format, "version": 1,
                                                          "files": ["dataset.json"]}))
        (out / "dataset.json").write_text("the other run's")
        yield from real_read(*args, **kwargs)

    monkeypatch.setattr(pretraining_examples, "read_documents", read_while_another_installs)
    proc = mbk("pretraining-data", "--input", inputs / "corpus.txt", "--vocab", inputs / "vocab.txt", "--out", out,
               "--seq-len", 16)
    assert_one_line_error(proc, f"another command wrote {out} while this one ran", "run again")
    assert proc.returncode == 2 and (out / "dataset.json").read_text() == "the other run's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_an_import_refuses_an_output_another_command_wrote_while_it_ran(mbk, inputs, tmp_path, monkeypatch):
    """Two `mbk import` into one new --out at once both said "imported", and the later silently replaced the
    other's model (a saved model of ours is replaced without --overwrite). What --out held when the import began
    is what it may replace: the other's output is kept, and this one says why in one line."""
    from mobilebert_kit.checkpoints import importer

    out = tmp_path / "out"
    real_import = importer.import_checkpoint

    def import_while_another_installs(*args, **kwargs):
        model = real_import(*args, **kwargs)
        _install_another_saved_model(out, "the other import's")  # while this one converted
        return model

    monkeypatch.setattr(importer, "import_checkpoint", import_while_another_installs)
    proc = mbk("import", inputs / "ckpt", "--out", out)
    assert_one_line_error(proc, f"another command wrote {out} while this one ran", "run again")
    assert proc.returncode == 2 and (out / "config.json").read_text() == "the other import's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary left beside it


def _install_another_saved_model(out, text):
    """Installs at ``out`` what another command's saved model looks like (its marker and a config.json ``text``)."""
    from mobilebert_kit.models.api import SAVED_MODEL

    out.mkdir()
    (out / ".mbk-output.json").write_text(json.dumps({"format": SAVED_MODEL.format, "version": 1,
                                                      "files": ["config.json"]}))
    (out / "config.json").write_text(text)


def test_quickstart_refuses_an_output_another_command_wrote_while_it_ran(mbk, tmp_path, monkeypatch):
    # Two `mbk quickstart --out X` (or an import into X meanwhile): both said "imported", one silently replaced.
    from mobilebert_kit.checkpoints import importer
    from mobilebert_kit.models import api

    out = tmp_path / "out"
    real_import, real_build = importer.import_checkpoint, api.build

    def import_while_another_installs(*args, **kwargs):
        model = real_import(*args, **kwargs)
        _install_another_saved_model(out, "the other run's")  # while this one imported
        return model

    monkeypatch.setattr(importer, "import_checkpoint", import_while_another_installs)
    monkeypatch.setattr(api, "build", lambda preset, **kw: real_build(  # step 1's student: seconds, not a minute
        "tiny-mobilebert" if preset == "mobilebert" else preset, **kw))
    proc = mbk("quickstart", "--out", out, "--seq-len", 16)
    assert_one_line_error(proc, f"another command wrote {out} while this one ran", "run again")
    assert proc.returncode == 2 and (out / "config.json").read_text() == "the other run's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("written", ["corpus", "out"])
def test_stdlib_corpus_refuses_outputs_another_command_wrote_while_it_ran(mbk, inputs, tmp_path, monkeypatch, written):
    # `--stdlib-corpus C` had no such check (two runs into one C: one corpus silently replaced), and --out's began
    # only once the corpus was built (another run's --out written meanwhile was replaced).
    from mobilebert_kit.data import stdlib_corpus
    from mobilebert_kit.data.records import PRETRAINING_DATA

    kinds = {"corpus": (stdlib_corpus.STDLIB_CORPUS, "train.txt"), "out": (PRETRAINING_DATA, "dataset.json")}
    kind, name = kinds[written]
    target = tmp_path / written
    real_build = stdlib_corpus.build_stdlib_corpus

    def build_while_another_installs(train, heldout):
        target.mkdir()  # the other run's output, installed while this one built the corpus
        (target / ".mbk-output.json").write_text(json.dumps({"format": kind.format, "version": 1, "files": [name]}))
        (target / name).write_text("the other run's")
        return real_build(train, heldout, root=Path(json.__file__).parent)  # a small part of the standard library

    monkeypatch.setattr(stdlib_corpus, "build_stdlib_corpus", build_while_another_installs)
    proc = mbk("pretraining-data", "--stdlib-corpus", tmp_path / "corpus", "--vocab", inputs / "vocab.txt",
               "--out", tmp_path / "out", "--seq-len", 16, "--shards", 1)
    assert_one_line_error(proc, f"another command wrote {target} while this one ran", "run again")
    assert proc.returncode == 2 and (target / name).read_text() == "the other run's"
