"""Loading the teacher and the student, checking they fit, and copying what the teacher can give.

Progressive transfer needs a teacher and a student with the same feature-map
size, number of layers and number of attention heads (Sun et al., 2020,
Sec. 3); they read the same token ids, so they also share the vocabulary.
"""

import contextlib

import numpy as np

from mobilebert_kit.errors import ConfigError
from mobilebert_kit.models.encoder import Encoder
from mobilebert_kit.models.heads import BertPretrainer
from mobilebert_kit.sources.model_source import PRESET_SEED, ModelSource
from mobilebert_kit.sources.spec import classify

# A teacher transfers what it learned, so it is a trained checkpoint or model, never a random preset.
TEACHER_KINDS = ("saved", "hf", "tf1", "model")
# A student starts from a preset, a config or a saved (possibly pre-distilled) model.
STUDENT_KINDS = ("preset", "config", "saved", "model")
# Scopes the paper takes from the teacher: "There is no knowledge transfer for
# the beginning embedding layer and the final classifier. They are the same for
# the student and teacher." (Sec. 3.3). The pooler feeds NSP, so it goes too.
COPIED_SCOPES = ("embeddings", "pooler", "mlm", "nsp")
MATCHED_KEYS = (
    ("hidden_size", "feature-map size (hidden_size)"),
    ("num_layers", "number of layers (num_layers)"),
    ("num_heads", "number of attention heads (num_heads)"),
    ("vocab_size", "vocabulary size (vocab_size)"),
)


@contextlib.contextmanager
def precision_policy(precision):
    """Sets the global Keras dtype policy for the models built inside the block, then restores it.

    Layers capture their policy when constructed, so models built inside keep
    ``precision`` afterwards while the rest of the process is unaffected.
    """
    from mobilebert_kit.backend import keras

    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(precision)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def check_compatible(teacher_config, student_config):
    """Raises ConfigError naming every mismatch that makes layer-to-layer transfer impossible.

    Example:
        >>> check_compatible(mbk.build("tiny-ib-bert").config, mbk.build("tiny-mobilebert").config)
    """
    mismatches = [
        f"{label}: teacher {teacher_config[key]}, student {student_config[key]}"
        for key, label in MATCHED_KEYS
        if teacher_config[key] != student_config[key]
    ]
    if mismatches:
        raise ConfigError(
            "teacher and student cannot be distilled layer to layer: they need equal feature-map size, "
            "layers, attention heads and vocabulary (MobileBERT Sec. 3); mismatched "
            + "; ".join(mismatches)
            + ". Pick a student preset or --student-override values that match the teacher"
        )


def split_teacher(model):
    """Returns ``(encoder, mlm_layer or None)`` for a loaded teacher (encoder or task model)."""
    if isinstance(model, Encoder):
        return model, None
    encoder = getattr(model, "encoder", None)
    if encoder is None:
        raise ConfigError(f"the teacher is a {type(model).__name__}, not an encoder or a mobilebert-kit task model")
    return encoder, model.get_layer("mlm") if getattr(model, "architecture", None) == "pretrainer" else None


def load_teacher(spec, precision="float32"):
    """Loads a teacher from a checkpoint path (HF, TF1 or ``mbk.save`` directory) or returns a given model.

    An MLM head is kept when the checkpoint has one (``head="auto"``); ``precision`` is the dtype policy the
    teacher is built with."""
    with precision_policy(precision):
        return ModelSource.load(spec, head="auto", accept=TEACHER_KINDS, what="teacher", dtype=precision).model


def build_student(spec, precision="float32", overrides=None, seed=PRESET_SEED):
    """Returns the student as a :class:`~mobilebert_kit.models.heads.BertPretrainer` (with its MLM/NSP heads).

    ``spec`` is a preset name, a dict of Encoder arguments, a saved encoder or pretrainer, or a model;
    ``overrides`` replace a preset's or dict's Encoder arguments; ``seed`` draws a preset's random weights."""
    overrides = dict(overrides or {})
    with precision_policy(precision):
        if overrides and classify(spec, accept=STUDENT_KINDS, what="student").kind == "saved":
            raise ConfigError("student overrides apply to presets only; a saved student keeps its config")
        model = ModelSource.load(spec, head="auto", accept=STUDENT_KINDS, what="student", seed=seed,
                                 **overrides, dtype=precision).model
        if isinstance(model, Encoder):
            model = BertPretrainer(model)
        if getattr(model, "architecture", None) != "pretrainer":
            raise ConfigError(f"the student must be an encoder or a pretrainer, got {type(model).__name__}")
    return model


def _norm_types_agree(path, teacher_config, student_config):
    if "norm" not in path.split("/")[-2] or path.startswith("mlm/"):
        return True  # the MLM transform always uses a real LayerNorm
    return teacher_config["normalization_type"] == student_config["normalization_type"]


def copy_from_teacher(teacher_model, student):
    """Copies embeddings, pooler and MLM/NSP heads from the teacher where names and shapes agree.

    A norm weight is copied only between norms of the same kind (a LayerNorm
    gamma means something else in a NoNorm). Returns ``copied`` (paths), ``skipped`` (``path: reason``) and
    ``embeddings_complete`` (every student embedding weight was copied, so the embedding layer computes
    the teacher's function)."""
    from mobilebert_kit.models.api import named_weights
    from mobilebert_kit.training.stages import scope_of

    teacher_encoder, _ = split_teacher(teacher_model)
    teacher_weights = named_weights(teacher_model)
    if teacher_model is teacher_encoder:
        teacher_weights = {f"encoder/{p}": v for p, v in teacher_weights.items()}
    tcfg, scfg = teacher_encoder.config, student.encoder.config
    copied, skipped = [], {}
    for path, var in named_weights(student).items():
        if scope_of(path) not in COPIED_SCOPES:
            continue
        source = teacher_weights.get(path)
        if source is None:
            skipped[path] = "the teacher has no such weight"
        elif tuple(source.shape) != tuple(var.shape):
            skipped[path] = f"shape {list(var.shape)} != teacher {list(source.shape)}"
        elif not _norm_types_agree(path, tcfg, scfg):
            skipped[path] = f"norm types differ ({tcfg['normalization_type']} vs {scfg['normalization_type']})"
        else:
            var.assign(np.asarray(source.numpy(), dtype=var.dtype.as_numpy_dtype))
            copied.append(path)
    embedding_paths = [p for p in named_weights(student) if scope_of(p) == "embeddings"]
    complete = bool(embedding_paths) and all(p in copied for p in embedding_paths)
    return {"copied": copied, "skipped": skipped, "embeddings_complete": complete}
