"""The process that runs a text-in ``.onnx`` file: onnxruntime and onnxruntime-extensions only, as in an app.

Started by :class:`mobilebert_kit.artifacts.text_session.TextSession` (which says why) with
``python text_child.py MODEL THREADS``; imports nothing of mobilebert_kit.

Protocol on stdin / stdout, each message an 8-byte little-endian length and its bytes: first the child sends
the JSON of the session's inputs and outputs (name, shape, type) and the nanoseconds its load took; then, per
request (a JSON object mapping each string input to its list of texts), it answers with an ``.npz`` of the
outputs (``0``, ``1``, ... in graph order), or with a JSON ``{"error": ...}`` whose first byte is ``{``. A
request ``{"timed": FEEDS}`` is answered ``{"ns": N}``: the nanoseconds of ``session.run`` alone.
"""

import io
import json
import struct
import sys
import time


def _send(stream, data):
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _receive(stream):
    head = stream.read(8)
    if len(head) < 8:
        return None
    (size,) = struct.unpack("<Q", head)
    return stream.read(size)


def main(argv):
    import numpy as np
    import onnxruntime as ort
    import onnxruntime_extensions

    path, threads = argv[1], int(argv[2])
    options = ort.SessionOptions()
    options.log_severity_level = 4
    if threads:
        options.intra_op_num_threads = threads
    options.register_custom_ops_library(onnxruntime_extensions.get_library_path())
    out, inp = sys.stdout.buffer, sys.stdin.buffer
    try:
        start = time.perf_counter_ns()
        with open(path, "rb") as handle:  # bytes read once: never a mapping of a file that can change
            session = ort.InferenceSession(handle.read(), options, providers=["CPUExecutionProvider"])
        load_ns = time.perf_counter_ns() - start
    except Exception as err:  # noqa: BLE001  (reported to the parent in one line)
        _send(out, json.dumps({"error": str(err).splitlines()[0] if str(err) else type(err).__name__}).encode())
        return 0
    describe = lambda args: [{"name": a.name, "shape": list(a.shape), "type": a.type} for a in args]  # noqa: E731
    _send(out, json.dumps({"inputs": describe(session.get_inputs()), "outputs": describe(session.get_outputs()),
                           "load_ns": load_ns}).encode())
    while True:
        request = _receive(inp)
        if request is None:
            return 0
        try:
            request = json.loads(request)
            timed = "timed" in request
            feeds = {name: np.asarray(texts, dtype=object) for name, texts in request.get("timed", request).items()}
            start = time.perf_counter_ns()
            values = session.run(None, feeds)
            if timed:
                _send(out, json.dumps({"ns": time.perf_counter_ns() - start}).encode())
                continue
            buffer = io.BytesIO()
            np.savez(buffer, **{str(i): value for i, value in enumerate(values)})
            _send(out, buffer.getvalue())
        except Exception as err:  # noqa: BLE001
            _send(out, json.dumps({"error": str(err).splitlines()[0] if str(err) else type(err).__name__}).encode())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
