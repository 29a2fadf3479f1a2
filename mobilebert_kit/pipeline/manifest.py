"""StageManifest: what a pipeline stage consumed, stored next to what it produced.

docs/pipeline.md ("Caching: stage manifests") says what each stage's key covers and when a stage is skipped;
the manifest is written after the outputs, atomically, so an interrupted stage has none and re-runs.
"""

import hashlib
import json
import os
from pathlib import Path

from mobilebert_kit.errors import MbkError
from mobilebert_kit.utils.atomic import atomic_file
from mobilebert_kit.utils.input_paths import open_regular
from mobilebert_kit.utils.structured import load_json

MANIFEST_VERSION = 1


def file_hash(path):
    """SHA-256 of a file's bytes, or of a directory's files (relative names and bytes, sorted)."""
    path = Path(path)
    digest = hashlib.sha256()
    if path.is_dir():
        for root, dirs, files in os.walk(path):
            dirs.sort()
            # Hidden files (.git*, editor droppings) do not change the model.
            for name in sorted(f for f in files if not f.startswith(".")):
                full = Path(root) / name
                digest.update(str(full.relative_to(path)).encode() + b"\0")
                digest.update(file_hash(full).encode())
        return digest.hexdigest()
    # open_regular never blocks (a FIFO) and refuses anything but a regular file in one line.
    with open_regular(path, "input") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def stage_key(inputs):
    """SHA-256 of a JSON-serialisable description of a stage's inputs (key order does not matter)."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()


class StageManifest:
    """The manifest of one stage: ``<first output>.stage.json``.

    Args:
        stage: the stage name (``export``, ``profile-host``, ...), recorded for people reading it.
        outputs: the files the stage writes; the manifest lives next to the first one.
        inputs: a JSON-serialisable description of everything the outputs depend on
            (file content hashes, recipe table, options).

    Example:
        >>> manifest = StageManifest("export", ["out/m.tflite"], {"recipe": {...}})  # doctest: +SKIP
        >>> if not manifest.is_current(): run(); manifest.save()  # doctest: +SKIP
    """

    def __init__(self, stage, outputs, inputs):
        self.stage = stage
        self.outputs = [Path(p) for p in outputs]
        self.inputs = inputs
        self.key = stage_key(inputs)
        self.path = self.outputs[0].with_name(self.outputs[0].name + ".stage.json")

    def recorded(self):
        """The stored manifest as a dict, or None when absent or unreadable."""
        try:
            return load_json(self.path, self.path.name, expect=dict, error=MbkError)
        except MbkError:  # missing, deep, special, not JSON: the stage simply runs again
            return None

    def is_current(self):
        """True when the stored key matches and every output has the recorded hash."""
        data = self.recorded()
        if not data or data.get("version") != MANIFEST_VERSION or data.get("key") != self.key:
            return False
        hashes = data.get("outputs")
        return isinstance(hashes, dict) and all(path.is_file() and hashes.get(path.name) == file_hash(path)
                                                for path in self.outputs)

    def save(self):
        """Records the key and the hashes of the outputs (call after they are written)."""
        data = {
            "version": MANIFEST_VERSION, "stage": self.stage, "key": self.key, "inputs": self.inputs,
            "outputs": {p.name: file_hash(p) for p in self.outputs},
        }
        with atomic_file(self.path, "w") as handle:
            json.dump(data, handle, indent=2, sort_keys=True, default=str)
        return self.path
