"""ModelSource: what ``SRC`` names (saved model, Hugging Face directory, preset) and what comes with it.

Besides the Keras model, an export needs what an app needs to tokenize: the
vocabulary, lower-casing and labels. Those are read from the source directory
when present (``vocab.txt``, ``tokenizer_config.json``, ``config.json``'s
``id2label``) and embedded in the artifact's metadata.

A preset has random weights. They are drawn with a fixed seed so that
``mbk export tiny-bert`` and ``mbk validate ... --reference tiny-bert`` see
the same model (tf_keras initializers are deterministic after
``keras.utils.set_random_seed``); such artifacts are for latency, not accuracy.
"""

from dataclasses import dataclass, field
from pathlib import Path

from mobilebert_kit.data.vocab import TOKENIZER_FILES, copy_tokenizer_files  # noqa: F401  (re-exported)
from mobilebert_kit.errors import CheckpointError, ConfigError
from mobilebert_kit.utils.structured import load_json

PRESET_SEED = 0


@dataclass
class ModelSource:
    """A loaded model and the deployment facts that travel with it.

    Args:
        model: the Encoder or task model.
        kind: ``"saved"``, ``"hf"``, ``"tf1"`` or ``"preset"``.
        name: what the user passed.
        directory: the source directory (None for a preset).
        labels: class names of a classification head, if recorded.

    Example:
        >>> source = ModelSource.load("tiny-bert")  # doctest: +SKIP
        >>> source.kind, source.tokenizer  # doctest: +SKIP
        ('preset', None)
    """

    model: object
    kind: str
    name: str
    directory: Path = None
    labels: list = field(default_factory=list)

    @classmethod
    def load(cls, src, head="auto", **overrides):
        """Loads ``src``: a directory saved by ``mbk.save``, a Hugging Face directory or a preset name.

        Args:
            src: the source.
            head: for Hugging Face directories, the head to load (``"auto"``: the one present).
            **overrides: Encoder options that do not change weights.
        """
        from mobilebert_kit.models.presets import PRESETS

        path = Path(str(src))
        import mobilebert_kit as mbk

        if _is_tf1_checkpoint(path):
            # An original (google-research) TF1 checkpoint: directory or prefix with *.index + bert_config.json.
            model = mbk.import_checkpoint(path, head=head, **overrides)
            return cls(model, "tf1", str(src), path if path.is_dir() else path.parent)
        if not path.is_dir() and str(src) not in PRESETS:
            if path.exists():
                raise CheckpointError(f"{src} is a file; pass a saved-model or Hugging Face directory, or a preset name")
            raise ConfigError(f"{src} is not a directory or a preset; valid presets: {', '.join(PRESETS)}")
        from mobilebert_kit.models.api import is_saved_model

        if path.is_dir():
            if is_saved_model(path):
                return cls(mbk.load(path, **overrides), "saved", str(src), path, _labels(path))
            if (path / "config.json").is_file():
                model = mbk.import_checkpoint(path, head=head, **overrides)
                return cls(model, "hf", str(src), path, _labels(path))
            raise CheckpointError(
                f"{src} is neither a saved model (mbk save) nor a Hugging Face directory (config.json + model.safetensors)"
            )
        if str(src) in PRESETS:
            from mobilebert_kit.backend import keras

            keras.utils.set_random_seed(PRESET_SEED)
        return cls(mbk.build(str(src), **overrides), "preset", str(src))

    @property
    def tokenizer(self):
        """A WordPieceTokenizer when the source directory has a vocabulary, else None."""
        from mobilebert_kit.data.word_piece_tokenizer import WordPieceTokenizer

        if self.directory is not None and (self.directory / "vocab.txt").is_file():
            return WordPieceTokenizer.from_directory(self.directory)
        return None

    def describe(self):
        if self.kind == "preset":
            return f"preset {self.name} (random weights, seed {PRESET_SEED})"
        kinds = {"saved": "saved model", "hf": "Hugging Face checkpoint", "tf1": "TF1 checkpoint"}
        return f"{kinds.get(self.kind, self.kind)} {self.name}"


def _is_tf1_checkpoint(path):
    """A TF1 checkpoint prefix (``PREFIX.index`` exists) or a directory with ``*.index`` and no config.json/saved model."""
    if Path(f"{path}.index").is_file():
        return True
    if not path.is_dir() or (path / "config.json").is_file():
        return False
    from mobilebert_kit.models.api import is_saved_model

    return not is_saved_model(path) and any(path.glob("*.index"))


def _labels(directory):
    """Class names from a Hugging Face config's ``id2label`` or a ``labels.txt``, in id order."""
    labels_file = directory / "labels.txt"
    if labels_file.is_file():
        return [line for line in labels_file.read_text(encoding="utf-8").splitlines() if line]
    try:
        config = load_json(directory / "config.json", "config.json", expect=dict)
    except ConfigError:
        return []
    id2label = config.get("id2label") or {}
    try:
        return [id2label[k] for k in sorted(id2label, key=int)]
    except (TypeError, ValueError):
        return []
