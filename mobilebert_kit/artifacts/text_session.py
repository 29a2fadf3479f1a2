"""TextSession: a text-in ``.onnx`` file run in a process of its own, holding only what an app's holds.

onnxruntime-extensions' custom ops (``mbk export --tokenizer-in-graph``) crashed or tokenized wrongly in a
process that had loaded TensorFlow, torch and the tokenizer libraries; the app loads them beside onnxruntime
alone, so mbk runs the file there too: ``artifacts/text_child.py`` in a child process, over pipes. The object
offers the part of ``onnxruntime.InferenceSession`` that :class:`~mobilebert_kit.artifacts.runner.ArtifactRunner`
uses.

Example:
    >>> session = TextSession("text.onnx")  # doctest: +SKIP
    >>> session.run(None, {"text": np.array(["Hello world"], object)})[0].shape  # doctest: +SKIP
    (1, 384)
"""

import io
import json
import struct
import subprocess
import sys
import weakref
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from mobilebert_kit.artifacts.errors import RuntimeLoadError

CHILD = Path(__file__).with_name("text_child.py")


class TextSession:
    """``path`` loaded by onnxruntime with onnxruntime-extensions in a child process.

    Args:
        path (str | os.PathLike): the text-in ``.onnx`` file.
        threads (int | None): intra-op threads (None: onnxruntime's default).

    Raises:
        RuntimeLoadError: the child cannot start or onnxruntime cannot load the file (one line).
    """

    def __init__(self, path, threads=None):
        self.path = Path(path)
        try:
            self._child = subprocess.Popen([sys.executable, str(CHILD), str(self.path), str(threads or 0)],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except OSError as err:
            raise RuntimeLoadError(f"cannot start the process that runs {self.path}: {err}") from err
        self.pid = self._child.pid
        weakref.finalize(self, _stop, self._child)
        described = self._receive("load")
        self._inputs = [SimpleNamespace(**spec) for spec in described["inputs"]]
        self._outputs = [SimpleNamespace(**spec) for spec in described["outputs"]]
        self.load_ms = described["load_ns"] / 1e6  # the session's creation in the child, as an app's

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def run(self, output_names, feeds):
        """The outputs (all, in graph order, or ``output_names``) of the texts in ``feeds``."""
        values = self._request(_texts(feeds))
        names = [o.name for o in self._outputs]
        return [values[names.index(n)] for n in output_names] if output_names else values

    def timed_run(self, feeds):
        """Runs ``feeds`` and returns the nanoseconds ``session.run`` took in the child (no pipe time)."""
        return int(self._request({"timed": _texts(feeds)})["ns"])

    def _request(self, message):
        request = json.dumps(message).encode()
        try:
            self._child.stdin.write(struct.pack("<Q", len(request)) + request)
            self._child.stdin.flush()
        except OSError as err:
            raise RuntimeError(f"the process running {self.path} is gone ({err})") from err
        return self._receive("run")

    def _receive(self, what):
        head = self._child.stdout.read(8)
        if len(head) < 8:
            code = self._child.wait()
            raise RuntimeLoadError(f"the process running {self.path} ended during {what} (exit {code}); run it with "
                                   "onnxruntime and onnxruntime-extensions alone to see why")
        (size,) = struct.unpack("<Q", head)
        data = self._child.stdout.read(size)
        if data[:1] == b"{":
            message = json.loads(data)
            if "error" in message:
                error = RuntimeLoadError if what == "load" else RuntimeError
                raise error(f"{self.path} cannot be {'loaded' if what == 'load' else 'run'} by onnxruntime with "
                            f"onnxruntime-extensions: {message['error']}")
            return message
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            return [arrays[str(i)] for i in range(len(arrays.files))]


def _texts(feeds):
    return {name: [str(t) for t in np.asarray(value, dtype=object).ravel()] for name, value in feeds.items()}


def _stop(child):
    try:
        child.stdin.close()
        child.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        child.kill()
