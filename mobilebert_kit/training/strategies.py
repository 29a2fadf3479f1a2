"""``tf.distribute`` strategies by name: the one table ``mbk distill`` and ``mbk finetune`` read.

A strategy is a record: its command-line name, what it is for, and how it
is built. The training loops never test a strategy's name; they ask only
:func:`is_chief` (who writes the run directory) and the strategy's replica
count.

``multi_worker`` is ``tf.distribute.MultiWorkerMirroredStrategy`` configured
by ``TF_CONFIG`` (:data:`TF_CONFIG_EXAMPLE`; docs/distillation.md, "Several
workers"). ``TF_CONFIG`` comes from the environment, so it is parsed as
untrusted input (bounded, checked field by field) before TensorFlow sees it:
TensorFlow's own parser answers a bad one with a traceback or a hang.

The strategy must be built before TensorFlow runs its first operation
(collective ops are configured at start-up), so the commands build it first.
"""

import contextlib
import hashlib
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Callable

from mobilebert_kit.errors import ConfigError, TrainingError, check_choice, first_line
from mobilebert_kit.utils.structured import load_json

# Job names MultiWorkerMirroredStrategy runs; "evaluator" is a side job it ignores.
CLUSTER_JOBS = ("chief", "worker", "evaluator")
_TRAINING_JOBS = ("chief", "worker")  # the jobs whose processes join the collectives
MAX_TASKS = 4096
TF_CONFIG_EXAMPLE = ('{"cluster": {"worker": ["host0:12345", "host1:12345"]}, '
                     '"task": {"type": "worker", "index": 0}}')


@dataclass(frozen=True)
class _Strategy:
    name: str
    help: str
    build: Callable


def _tf():
    """TensorFlow, imported only when a strategy is built (``--help`` reads this module's table)."""
    from mobilebert_kit.backend import tf

    return tf


def _multi_worker():
    tf = _tf()
    cluster, kind, index = cluster_config()  # refuses a missing or malformed TF_CONFIG with a one-line message
    wait_for_workers(cluster, kind, index)
    try:
        return tf.distribute.MultiWorkerMirroredStrategy()
    except (RuntimeError, ValueError, tf.errors.OpError) as err:
        raise TrainingError(f"cannot join the cluster of TF_CONFIG ({first_line(err)}); start every worker with the same "
                            "cluster and free ports, before TensorFlow runs anything else") from err


# Seconds a worker waits for the others to start before it gives up (MBK_CLUSTER_WAIT_S sets another).
CLUSTER_WAIT_S = 600


def wait_for_workers(cluster, kind, index, timeout_s=None, say=None):
    """Returns once every other chief or worker of ``cluster`` accepts connections on its port.

    Why a Python wait (TensorFlow's, in C++, never gave up and was deaf to Ctrl-C and SIGTERM): docs/distillation.md,
    "Several workers". Meanwhile this worker answers on its own port, so the others' waits end too; TensorFlow's
    server takes the port once this returns (a peer that connects in between is refused and tries again).
    ``timeout_s`` defaults to ``MBK_CLUSTER_WAIT_S`` or :data:`CLUSTER_WAIT_S`; ``say`` prints a line (to stderr).
    A taken port or a peer that did not start in time is a TrainingError.

    Example:
        >>> wait_for_workers({"worker": ["localhost:12345"]}, "worker", 0)  # one worker: nothing to wait for
    """
    peers = [(job, i, address) for job, addresses in cluster.items() if job in _TRAINING_JOBS
             for i, address in enumerate(addresses) if (job, i) != (kind, index)]
    if not peers or kind not in _TRAINING_JOBS:
        return
    if timeout_s is None:
        timeout_s = _cluster_wait()
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    port = int(cluster[kind][index].rsplit(":", 1)[1])
    try:
        dual = socket.has_dualstack_ipv6()
        family = socket.AF_INET6 if dual else socket.AF_INET
        listener = socket.create_server(("", port), family=family, dualstack_ipv6=dual)
    except OSError as err:
        raise TrainingError(f"cannot listen on port {port}, this process's address in TF_CONFIG ({err.strerror or err}); "
                            "give each worker a free port") from err
    say(f"joining the cluster of TF_CONFIG as {kind} {index}; waiting up to {timeout_s:g} s for the other "
        f"{len(peers)} process(es) to start (Ctrl-C stops)")
    waiting = list(peers)
    deadline = time.monotonic() + timeout_s
    with listener:
        listener.setblocking(False)
        while waiting:
            _answer_probes(listener)
            probes = {peer: _probe(peer[2]) for peer in waiting}
            ours = _answer_probes(listener)  # a peer's address that reaches this listener names this process
            for job, i, address in (p for p, local in probes.items() if local in ours and p[2].endswith(f":{port}")):
                _fail(f"cluster.{job}[{i}] {address!r} reaches this process ({kind} {index}, "
                      f"{cluster[kind][index]!r}): give every task its own host:port")
            waiting = [peer for peer, local in probes.items() if local is None]
            if waiting and time.monotonic() > deadline:
                shown = ", ".join(f"{job} {i} ({address})" for job, i, address in waiting[:3])
                raise TrainingError(f"{shown} did not start within {timeout_s:g} s; start every worker of TF_CONFIG with "
                                    "the same command (or set MBK_CLUSTER_WAIT_S to wait longer)")
            time.sleep(0.2)
        # The others may still be probing this port: answer them a little longer before TensorFlow takes it.
        until = time.monotonic() + 1.0
        while time.monotonic() < until:
            _answer_probes(listener)
            time.sleep(0.05)


def _answer_probes(listener):
    """Accepts (and so answers) every probe waiting on the non-blocking ``listener``; returns where they came from."""
    came = set()
    with contextlib.suppress(BlockingIOError, InterruptedError):
        while True:
            connection, address = listener.accept()
            connection.close()
            came.add(_endpoint(address))
    return came


def _endpoint(address):
    """``(ip, port)`` of a socket address, an IPv4-mapped IPv6 address as IPv4 (a dual-stack listener's view)."""
    return address[0].removeprefix("::ffff:"), address[1]


def _cluster_wait():
    text = os.environ.get("MBK_CLUSTER_WAIT_S", "")
    if not text:
        return float(CLUSTER_WAIT_S)
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ConfigError(f"MBK_CLUSTER_WAIT_S {text[:40]!r} is not a positive number of seconds; unset it or give "
                          "one such as 600")
    return value


def _probe(address):
    """This end's ``(ip, port)`` of a connection to ``address``; None when nothing answers there."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0) as connection:
            return _endpoint(connection.getsockname())
    except OSError:
        return None


def _tpu():
    tf = _tf()
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=os.environ.get("TPU_NAME", ""))
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    except (RuntimeError, ValueError, tf.errors.OpError) as err:
        raise TrainingError(f"no TPU found ({first_line(err)}); run on a TPU VM (TPU_NAME names a remote one) or use "
                            "--strategy default") from err


STRATEGIES = {
    record.name: record
    for record in (
        _Strategy("default", "one device (the first GPU if any, else the CPU)",
                  lambda: _tf().distribute.get_strategy()),
        _Strategy("mirrored", "one replica per local GPU (tf.distribute.MirroredStrategy)",
                  lambda: _tf().distribute.MirroredStrategy()),
        _Strategy("multi_worker", "one replica per worker process of the cluster named by TF_CONFIG "
                  "(MultiWorkerMirroredStrategy); every worker runs the same command", _multi_worker),
        _Strategy("tpu", "the TPU cores of this TPU VM, or of TPU_NAME (TPUStrategy; not verified here)", _tpu),
    )
}
STRATEGY_HELP = "; ".join(f"{r.name}: {r.help}" for r in STRATEGIES.values())


def make_strategy(name):
    """The ``tf.distribute.Strategy`` called ``name`` in :data:`STRATEGIES`, built now (before TensorFlow runs
    anything). An unknown name or a bad ``TF_CONFIG`` is a ConfigError, an unreachable cluster or TPU a
    TrainingError."""
    check_choice("strategy", name, tuple(STRATEGIES))
    return STRATEGIES[name].build()


def _fail(problem):
    raise ConfigError(f"TF_CONFIG {problem}; set it on every worker like {TF_CONFIG_EXAMPLE}")


def cluster_config(environ=None):
    """``TF_CONFIG`` of ``environ`` (default ``os.environ``), checked: ``({job: [address]}, task type, index)``.

    A bad one (missing, not a JSON object, too deep or large, no workers, an address that is not
    ``host:port``, a task not in the cluster) is a one-line ConfigError naming the field.

    Example:
        >>> cluster_config({"TF_CONFIG": '{"cluster": {"worker": ["localhost:2222"]}, '
        ...                 '"task": {"type": "worker", "index": 0}}'})
        ({'worker': ['localhost:2222']}, 'worker', 0)
    """
    environ = os.environ if environ is None else environ
    text = environ.get("TF_CONFIG", "")
    if not text.strip():
        _fail("is not set (multi_worker reads the cluster and this process's task from it)")
    config = load_json(text, "TF_CONFIG", max_bytes=1 << 20, max_depth=8, expect=dict,
                       fix=f"set it on every worker like {TF_CONFIG_EXAMPLE}")
    cluster, task = config.get("cluster"), config.get("task")
    if not isinstance(cluster, dict) or not cluster:
        _fail("has no \"cluster\" object naming the workers")
    for job, addresses in cluster.items():
        if job not in CLUSTER_JOBS:
            _fail(f"names job {job[:40]!r}; multi_worker runs only {', '.join(CLUSTER_JOBS)} (no parameter servers)")
        if not isinstance(addresses, list) or not addresses or len(addresses) > MAX_TASKS:
            _fail(f"cluster.{job} must be a list of 1 to {MAX_TASKS} \"host:port\" addresses")
        for i, address in enumerate(addresses):
            host, sep, port = address.rpartition(":") if isinstance(address, str) else ("", "", "")
            if not (sep and host and port.isdigit() and port.isascii() and 0 < int(port) < 65536
                    and address.isprintable() and " " not in address):
                _fail(f"cluster.{job}[{i}] is {str(address)[:60]!r}, not a \"host:port\" address")
    if not any(job in cluster for job in ("chief", "worker")):
        _fail("has no chief or worker job")
    seen = {}
    for job, i, address in ((job, i, a) for job, addresses in cluster.items() for i, a in enumerate(addresses)):
        if seen.setdefault(address.lower(), f"cluster.{job}[{i}]") != f"cluster.{job}[{i}]":
            _fail(f"cluster.{job}[{i}] is {address[:60]!r}, the address of {seen[address.lower()]}: give every task "
                  "its own host:port")
    if len(cluster.get("chief", [])) > 1:
        _fail("names more than one chief")
    if not isinstance(task, dict):
        _fail("has no \"task\" object naming this process (type and index)")
    kind, index = task.get("type"), task.get("index", 0)
    if not isinstance(kind, str) or kind not in cluster:
        _fail(f"task.type {str(kind)[:40]!r} is not a job of the cluster ({', '.join(cluster)})")
    if kind not in _TRAINING_JOBS:  # it would train alone, unseen, and write nothing
        _fail(f"task.type {kind!r}: mbk runs no side evaluator (score the chief's output with mbk evaluate); start "
              f"only the {' and '.join(_TRAINING_JOBS)} tasks")
    if isinstance(index, bool) or not isinstance(index, int):
        _fail(f"task.index {str(index)[:40]!r} is a {type(index).__name__}, not an integer: write it without quotes")
    if not 0 <= index < len(cluster[kind]):
        _fail(f"task.index {index} is not one of 0..{len(cluster[kind]) - 1} (cluster.{kind})")
    return cluster, kind, index


def is_chief(strategy):
    """Whether this process writes the run directory under ``strategy``.

    One-process strategies always do; in a cluster it is the ``chief`` task,
    or ``worker`` 0 when the cluster has no ``chief``."""
    resolver = getattr(strategy, "cluster_resolver", None)
    task_type = getattr(resolver, "task_type", None)
    if task_type in (None, "chief"):  # no resolver has no task type either
        return True
    jobs = resolver.cluster_spec().as_dict()
    return task_type == "worker" and int(resolver.task_id or 0) == 0 and "chief" not in jobs


def cpu_only():
    """Whether this process has no GPU or TPU, so every strategy runs on the CPU."""
    return not any(_tf().config.list_logical_devices(kind) for kind in ("GPU", "TPU"))


def worker_label(strategy):
    """``"worker 1 of 2"`` in a cluster, else ``""`` (for progress lines)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    task_type = getattr(resolver, "task_type", None)
    if task_type is None:
        return ""
    jobs = resolver.cluster_spec().as_dict()
    total = sum(len(v) for k, v in jobs.items() if k in ("chief", "worker"))
    return f"{task_type} {resolver.task_id} of {total}"


def check_same_run(strategy, settings):
    """Refuses, on every worker, a cluster whose workers were started with other options or data.

    ``settings`` (JSON-able) is what decides the run's numbers; the workers all-gather a digest of it. Workers
    that differ each apply the summed gradients with their own options and drift apart silently (a worker
    started with another learning rate gave no message), or stop one another mid-run. No-op outside a cluster.
    """
    if not worker_label(strategy):
        return
    tf = _tf()
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).digest()
    mine = tf.constant([[int.from_bytes(digest[i:i + 4], "little", signed=True) for i in range(0, 16, 4)]])
    gathered = tf.function(lambda: strategy.gather(strategy.run(lambda: mine), axis=0), autograph=False)()
    if len({tuple(row) for row in gathered.numpy().tolist()}) > 1:
        raise ConfigError("the workers of TF_CONFIG were started with different options or data; start every worker "
                          "with the same command on the same data")


def quiet_cluster_teardown(strategy):
    """After a cluster run has finished, points fd 2 at /dev/null for the rest of the process.

    Whichever worker exits last sees the others' coordination service go away
    and TensorFlow's C++ runtime logs a heartbeat failure to fd 2: noise after a
    run that completed, burying its last line. One-process strategies are left alone,
    as is ``MBK_VERBOSE_TF=1``."""
    if not worker_label(strategy) or os.environ.get("MBK_VERBOSE_TF") == "1":
        return
    sys.stderr.flush()
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
    except OSError:
        pass
