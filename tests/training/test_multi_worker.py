"""Training on several workers: ``--strategy multi_worker`` with two processes on loopback, TF_CONFIG checks.

Each worker is a real ``mbk`` process with its own ``TF_CONFIG``, as a cluster
launcher starts them; the result is compared with a one-device run of the
same options, and a SIGKILLed worker's run is resumed by starting every
worker again with ``--resume``.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.helpers import REPO, assert_one_line_error, run_mbk, saved_weights
from tests.training.distill_script import resume_config, run

# The options of resume_config() on the command line: the one-device reference is run through the API.
CLI_OPTIONS = ("--schedule", "progressive", "--layer-steps", "3", "--pd-steps", "0", "--batch-size", "4",
               "--checkpoint-every", "2", "--log-every", "1", "--shuffle-buffer", "16", "--learning-rate", "5e-3")
GOOD = {"cluster": {"worker": ["localhost:2222", "127.0.0.1:2223"]}, "task": {"type": "worker", "index": 1}}


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _start_workers(commands, tmp_path):
    """Starts one process per command, each with TF_CONFIG naming its task in a two-worker loopback cluster."""
    cluster = {"worker": [f"localhost:{p}" for p in _free_ports(len(commands))]}
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    procs = []
    for index, command in enumerate(commands):
        env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}),
               "TMPDIR": str(scratch)}
        procs.append(subprocess.Popen([sys.executable, "-m", *command], cwd=REPO, env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    return procs, scratch


def _wait(procs, timeout=300):
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        outputs.append((proc.returncode, out, err))
    return outputs


def _distill(inputs, out, *extra, student=None):
    return ("mobilebert_kit.cli.main", "distill", "--teacher", str(inputs / "teacher"), "--student",
            student or str(inputs / "student"), "--data", str(inputs / "data"), "--out", str(out), "--strategy",
            "multi_worker", *CLI_OPTIONS, *extra)


@pytest.fixture(scope="module")
def one_device(tiny_run_inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("one_device") / "run"
    run(tiny_run_inputs, out)
    return saved_weights(out / "pretrainer")


@pytest.fixture(scope="module")
def one_device_with_dropout(tiny_run_inputs, tmp_path_factory):
    """The preset student as given: attention dropout 0.1, whose masks must not depend on the split."""
    from rich.console import Console

    from mobilebert_kit.training.distiller import Distiller

    out = tmp_path_factory.mktemp("one_device_dropout") / "run"
    Distiller(str(tiny_run_inputs / "teacher"), "tiny-mobilebert", str(tiny_run_inputs / "data"), out,
              resume_config(), console=Console(file=open(os.devnull, "w"))).run()
    return saved_weights(out / "pretrainer")


def _assert_same_student(out, reference):
    _assert_same_weights(out / "pretrainer", reference)


def _assert_same_weights(directory, reference):
    weights = saved_weights(directory)
    assert set(weights) == set(reference)
    for name in reference:  # the contract's tolerance: 1e-4
        np.testing.assert_allclose(weights[name], reference[name], rtol=1e-4, atol=1e-4, err_msg=name)


def test_two_workers_match_one_device_and_only_the_chief_writes(tiny_run_inputs, one_device_with_dropout, tmp_path):
    # The workers read the teacher from a cache (each builds its own); the one-device reference runs it live.
    out = tmp_path / "run"
    command = _distill(tiny_run_inputs, out, "--teacher-cache", "on", student="tiny-mobilebert")
    procs, scratch = _start_workers([command] * 2, tmp_path)
    (rc0, out0, err0), (rc1, out1, err1) = _wait(procs)
    assert (rc0, rc1) == (0, 0), err0[-2000:] + err1[-2000:]
    assert "batch 4 over 2 replica(s)" in out0 and "worker 1 of 2" in out1
    assert "teacher cache: on" in out0 and "teacher cache: on" in out1
    assert "the chief wrote" in out1
    _assert_same_student(out, one_device_with_dropout)
    # The chief's files only; the other worker's scratch checkpoints are gone.
    assert sorted(p.name for p in out.iterdir()) == [
        ".mbk-output.json", "checkpoints", "pretrainer", "progress.json", "run.json", "student", "tensorboard"]
    assert json.loads((out / "progress.json").read_text())["complete"] is True
    assert list(scratch.iterdir()) == []


def test_workers_started_with_different_options_are_refused_on_every_worker(tiny_run_inputs, tmp_path):
    # A worker started with another learning rate trained on, silently: each worker applied the summed
    # gradients at its own rate, and the chief wrote a model no command describes.
    out = tmp_path / "run"
    commands = [_distill(tiny_run_inputs, out, "--learning-rate", rate) for rate in ("1e-3", "5e-2")]
    procs, _ = _start_workers(commands, tmp_path)
    for code, _, err in _wait(procs):
        assert code == 2 and "Traceback" not in err, err[-2000:]
        assert err.strip().splitlines()[-1] == ("mbk distill: error: the workers of TF_CONFIG were started with "
                                                "different options or data; start every worker with the same "
                                                "command on the same data")
    assert not out.exists()


@pytest.mark.slow
def test_a_sigkilled_worker_resumes_to_the_uninterrupted_result(tiny_run_inputs, one_device, tmp_path):
    out = tmp_path / "run"
    script = ("tests.training.distill_script", str(tiny_run_inputs), str(out))
    # Worker 1 is SIGKILLed after global step 5; the chief checkpointed step 4.
    procs, _ = _start_workers([(*script, "worker"), (*script, "worker", "KILL", "5")], tmp_path)
    (rc0, _, err0), (rc1, _, _) = _wait(procs)
    assert rc1 == -signal.SIGKILL
    assert rc0 != 0 and "--resume" in err0, err0[-2000:]  # the chief notices the lost peer and says what to do
    progress = json.loads((out / "progress.json").read_text())
    assert progress["global_step"] == 4 and not (out / "student").exists()
    # Every worker is started again with --resume: options come from run.json.
    resume = ("mobilebert_kit.cli.main", "distill", "--out", str(out), "--resume", "--strategy", "multi_worker")
    procs, _ = _start_workers([resume, resume], tmp_path)
    (rc0, out0, err0), (rc1, _, err1) = _wait(procs)
    assert (rc0, rc1) == (0, 0), err0[-2000:] + err1[-2000:]
    assert "resuming at layer_1, step 1" in out0
    _assert_same_student(out, one_device)


def test_cluster_refusals_are_one_line_before_anything_is_written(tiny_run_inputs, tmp_path, monkeypatch, capsys):
    from mobilebert_kit.cli.main import main

    # In this process: the refusal comes before TensorFlow joins (or waits for) any cluster.
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert main(list(_distill(tiny_run_inputs, tmp_path / "a"))[1:]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mbk distill: error: TF_CONFIG is not set"), err
    assert not (tmp_path / "a").exists()
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"ps": ["localhost:1"]}, "task": {"type": "ps"}}))
    code = main(["finetune", "--model", "tiny-bert", "--task", "classification", "--train", str(REPO / "pyproject.toml"),
                 "--vocab", str(tiny_run_inputs / "teacher" / "vocab.txt"), "--out", str(tmp_path / "b"),
                 "--strategy", "multi_worker"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "TF_CONFIG names job 'ps'" in err[0], err
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("value, fragment", [
    ("", "is not set"),
    ("{", "not valid JSON"),
    ("[1]", "JSON object"),
    ("[" * 100000 + "]" * 100000, "TF_CONFIG"),
    ('{"cluster": {}}', "no \"cluster\" object"),
    ('{"cluster": {"worker": "localhost:1"}, "task": {"type": "worker", "index": 0}}', "list of 1 to"),
    ('{"cluster": {"worker": []}, "task": {"type": "worker", "index": 0}}', "list of 1 to"),
    ('{"cluster": {"worker": ["localhost"]}, "task": {"type": "worker", "index": 0}}', "not a \"host:port\""),
    ('{"cluster": {"worker": ["localhost:99999"]}, "task": {"type": "worker", "index": 0}}', "not a \"host:port\""),
    ('{"cluster": {"worker": ["localhost:١٢"]}, "task": {"type": "worker", "index": 0}}', "not a \"host:port\""),
    ('{"cluster": {"worker": ["a b:1"]}, "task": {"type": "worker", "index": 0}}', "not a \"host:port\""),
    ('{"cluster": {"worker": [{"host": 1}]}, "task": {"type": "worker", "index": 0}}', "not a \"host:port\""),
    ('{"cluster": {"evaluator": ["h:1"]}, "task": {"type": "evaluator", "index": 0}}', "no chief or worker"),
    ('{"cluster": {"chief": ["h:1", "h:2"]}, "task": {"type": "chief", "index": 0}}', "more than one chief"),
    ('{"cluster": {"worker": ["h:1"]}}', "no \"task\" object"),
    ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "chief", "index": 0}}', "task.type 'chief'"),
    ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 1}}', "task.index 1 is not one of 0..0"),
    ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": true}}', "task.index 'True' is a bool"),
    ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": -1}}', "task.index -1 is not one of"),
    ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": "0"}}',
     "task.index '0' is a str, not an integer: write it without quotes"),
    ('{"cluster": {"worker": ["h:1"]}, "task": {"type": ["worker"], "index": 0}}', "task.type"),
    ('{"cluster": {"worker\\r\\nx": ["h:1"]}, "task": {"type": "worker", "index": 0}}', "names job"),
    # One address twice: the wait took this process's own port for the peer's, then TensorFlow hung in C++.
    ('{"cluster": {"worker": ["h:1", "H:1"]}, "task": {"type": "worker", "index": 0}}',
     "cluster.worker[1] is 'H:1', the address of cluster.worker[0]: give every task its own host:port"),
    # An evaluator trained the whole run alone and said "the chief wrote OUT/student", which no chief had.
    ('{"cluster": {"worker": ["h:1"], "evaluator": ["h:2"]}, "task": {"type": "evaluator", "index": 0}}',
     "task.type 'evaluator': mbk runs no side evaluator"),
])
def test_tf_config_is_refused_field_by_field(value, fragment):
    from mobilebert_kit.errors import ConfigError
    from mobilebert_kit.training.strategies import cluster_config

    with pytest.raises(ConfigError) as err:
        cluster_config({"TF_CONFIG": value})
    message = str(err.value)
    assert fragment in message and "TF_CONFIG" in message
    assert "\n" not in message and "\r" not in message and len(message) < 400


def test_tf_config_accepts_a_cluster_and_names_the_chief():
    from mobilebert_kit.training.strategies import cluster_config

    assert cluster_config({"TF_CONFIG": json.dumps(GOOD)}) == (GOOD["cluster"], "worker", 1)
    with_chief = {"cluster": {"chief": ["h:1"], "worker": ["h:2"], "evaluator": ["h:3"]},
                  "task": {"type": "chief"}}
    assert cluster_config({"TF_CONFIG": json.dumps(with_chief)}) == (with_chief["cluster"], "chief", 0)


def test_a_worker_whose_peer_never_starts_says_it_waits_and_stops_on_sigterm(tiny_run_inputs, tmp_path):
    # TensorFlow waits in C++ for every worker, for ever, holding the interpreter: Ctrl-C and SIGTERM were
    # ignored (only SIGKILL stopped it) and nothing said what it waited for.
    procs, _ = _start_workers([_distill(tiny_run_inputs, tmp_path / "o"), ("mobilebert_kit.cli.main", "--version")],
                              tmp_path)  # worker 0 waits; "worker 1" prints the version and never joins
    waiting, peer = procs
    peer.communicate(timeout=120)
    line = ""
    deadline = time.monotonic() + 120
    while "joining the cluster" not in line and time.monotonic() < deadline:
        line = waiting.stderr.readline()
    assert "joining the cluster of TF_CONFIG as worker 0; waiting up to 600 s for the other 1 process(es) to start" \
        in line, line
    waiting.send_signal(signal.SIGTERM)
    try:
        _, err = waiting.communicate(timeout=60)
    finally:
        waiting.kill()
    assert waiting.returncode == 130 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith("mbk distill: interrupted"), err
    assert not (tmp_path / "o").exists()


def test_a_peer_that_never_starts_is_one_line_after_the_wait():
    from mobilebert_kit.errors import MbkError
    from mobilebert_kit.training.strategies import wait_for_workers

    mine, theirs = _free_ports(2)
    cluster = {"chief": [f"localhost:{mine}"], "worker": [f"localhost:{theirs}"]}
    lines = []
    start = time.monotonic()
    with pytest.raises(MbkError) as err:
        wait_for_workers(cluster, "chief", 0, timeout_s=1, say=lines.append)
    assert time.monotonic() - start < 10
    assert str(err.value) == (f"worker 0 (localhost:{theirs}) did not start within 1 s; start every worker of "
                              "TF_CONFIG with the same command (or set MBK_CLUSTER_WAIT_S to wait longer)")
    assert lines == ["joining the cluster of TF_CONFIG as chief 0; waiting up to 1 s for the other 1 process(es) "
                     "to start (Ctrl-C stops)"]
    # A port another process holds is named before any wait.
    with socket.create_server(("", mine)):
        with pytest.raises(MbkError, match=f"cannot listen on port {mine}, this process's address in TF_CONFIG"):
            wait_for_workers(cluster, "chief", 0, timeout_s=1, say=lines.append)


def test_a_peer_address_that_reaches_this_process_is_one_line_not_a_hang():
    # "localhost" and "127.0.0.1" with one port: this process's own listener answered the probe of "the peer",
    # and TensorFlow then waited for ever in C++, deaf to Ctrl-C and SIGTERM.
    from mobilebert_kit.errors import ConfigError
    from mobilebert_kit.training.strategies import wait_for_workers

    (mine,) = _free_ports(1)
    cluster = {"worker": [f"localhost:{mine}", f"127.0.0.1:{mine}"]}
    start = time.monotonic()
    with pytest.raises(ConfigError) as err:
        wait_for_workers(cluster, "worker", 0, timeout_s=30, say=lambda line: None)
    assert time.monotonic() - start < 10
    assert str(err.value).startswith(f"TF_CONFIG cluster.worker[1] '127.0.0.1:{mine}' reaches this process (worker 0, "
                                     f"'localhost:{mine}'): give every task its own host:port")


def test_strategy_names_are_one_table():
    from mobilebert_kit.errors import ConfigError
    from mobilebert_kit.training.strategies import STRATEGIES, STRATEGY_HELP, is_chief, make_strategy

    assert set(STRATEGIES) == {"default", "mirrored", "multi_worker", "tpu"}
    assert all(name + ":" in STRATEGY_HELP for name in STRATEGIES)
    with pytest.raises(ConfigError, match="unknown strategy 'parameter_server'"):
        make_strategy("parameter_server")
    assert is_chief(make_strategy("default"))


def test_tpu_strategy_without_a_tpu_is_one_line(tiny_run_inputs, tmp_path):
    proc = run_mbk("finetune", "--model", "tiny-bert", "--task", "classification", "--train", REPO / "pyproject.toml",
                   "--vocab", tiny_run_inputs / "teacher" / "vocab.txt", "--out", tmp_path / "o", "--strategy", "tpu")
    if proc.returncode == 0:  # pragma: no cover - only on a TPU VM
        pytest.skip("this machine has a TPU")
    assert "Traceback" not in proc.stderr and not (tmp_path / "o").exists()
    assert_one_line_error(proc, "no TPU found")


def _finetune_inputs(tmp_path):
    """A tiny vocabulary and 64 labelled sentences: 8 steps per epoch at batch 8."""
    import random

    words = ["good", "bad", "movie", "film", "the", "was", "very"]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words) + "\n")
    rng = random.Random(0)
    rows = ["sentence\tlabel"]
    for _ in range(64):
        positive = rng.random() < 0.5
        rows.append(f"the {rng.choice(['movie', 'film'])} was {'good' if positive else 'bad'}\t"
                    f"{'pos' if positive else 'neg'}")
    train = tmp_path / "train.tsv"
    train.write_text("\n".join(rows) + "\n")
    return vocab, train


def _finetune(vocab, train, directory, strategy, *extra):
    return ("mobilebert_kit.cli.main", "finetune", "--model", "tiny-bert", "--vocab", str(vocab), "--task",
            "classification", "--train", str(train), "--out", str(directory), "--epochs", "2", "--batch-size",
            "8", "--seq-len", "8", "--seed", "3", "--strategy", strategy, *extra)


def test_a_finetune_chief_given_eval_alone_scores_the_model_it_saves(tmp_path):
    # --eval on the chief only: its predict was a collective the other worker never joined, so the chief
    # crashed after training ("internal error (UnavailableError ...)") and wrote no model.
    from mobilebert_kit.training.fine_tuner import evaluate_directory

    vocab, train = _finetune_inputs(tmp_path)
    out = tmp_path / "ft"
    command = _finetune(vocab, train, out, "multi_worker", "--epochs", "1")
    procs, _ = _start_workers([command + ("--eval", str(train)), command], tmp_path)
    (rc0, out0, err0), (rc1, _, err1) = _wait(procs)
    assert (rc0, rc1) == (0, 0), err0[-2000:] + err1[-2000:]
    results = json.loads((out / "task.json").read_text())["metrics"]
    assert f"eval accuracy={results['accuracy']:.4f}" in out0
    assert evaluate_directory(out, train) == pytest.approx(results)


@pytest.mark.slow
def test_two_worker_finetune_matches_one_device_writes_once_and_logs_the_global_loss(tiny_run_inputs, tmp_path):
    vocab, train = _finetune_inputs(tmp_path)
    out, reference = tmp_path / "ft", tmp_path / "ft_one_device"
    one = run_mbk(*_finetune(vocab, train, reference, "default")[1:])
    assert one.returncode == 0, one.stderr[-2000:]
    command = _finetune(vocab, train, out, "multi_worker")
    procs, scratch = _start_workers([command, command], tmp_path)
    (rc0, out0, err0), (rc1, out1, err1) = _wait(procs)
    assert (rc0, rc1) == (0, 0), err0[-2000:] + err1[-2000:]
    assert "worker 1 of 2" in out1 and sorted(p.name for p in out.iterdir()) == [
        ".mbk-output.json", "model", "task.json", "tensorboard", "vocab.txt"]
    # An untrained 2-class head starts near ln 2 = 0.69; summed over the two workers it would show 1.39.
    first = next(line for line in out0.splitlines() if line.startswith("fine-tuning 1/"))
    assert float(first.split("loss=")[1]) < 1.0, first
    # The same global batch on two workers trains the same model as on one device (issue 16's bar: 1e-4).
    _assert_same_weights(out / "model", saved_weights(reference / "model"))


@pytest.mark.slow
def test_a_sigkilled_finetune_worker_resumes_to_the_one_device_model(tmp_path):
    vocab, train = _finetune_inputs(tmp_path)
    out, reference = tmp_path / "ft", tmp_path / "ft_one_device"
    one = run_mbk(*_finetune(vocab, train, reference, "default")[1:])
    assert one.returncode == 0, one.stderr[-2000:]
    command = _finetune(vocab, train, out, "multi_worker", "--checkpoint-every", "3")
    # Worker 1 is SIGKILLed after step 5 of 16; the chief checkpointed step 3.
    killed = ("tests.training.finetune_script", "KILL", "5", *command[2:])
    procs, scratch = _start_workers([command, killed], tmp_path)
    (rc0, _, err0), (rc1, _, _) = _wait(procs)
    assert rc1 == -signal.SIGKILL
    assert rc0 != 0 and "--resume" in err0 and "Traceback" not in err0, err0[-2000:]
    progress = json.loads((out / "run" / "progress.json").read_text())
    assert (progress["step"], progress["total"]) == (3, 16) and not (out / "task.json").exists()
    # Every worker is started again with --resume; the inputs and options come from OUT/run/run.json.
    resume = ("mobilebert_kit.cli.main", "finetune", "--out", str(out), "--resume", "--strategy", "multi_worker")
    procs, _ = _start_workers([resume, resume], tmp_path)
    (rc0, out0, err0), (rc1, _, err1) = _wait(procs)
    assert (rc0, rc1) == (0, 0), err0[-2000:] + err1[-2000:]
    assert "resuming at step 4 of 16" in out0
    assert sorted(p.name for p in out.iterdir()) == [".mbk-output.json", "model", "task.json", "tensorboard",
                                                    "vocab.txt"]
    _assert_same_weights(out / "model", saved_weights(reference / "model"))
