"""``import_checkpoint``: Hugging Face directories, TF1 checkpoints and saved models.

Every weight of the model must come from the checkpoint: missing, unexpected
and misshaped variables are collected and reported by name in one error.
Weights of task heads found in the checkpoint are kept when ``head`` asks for
them and otherwise reported as skipped (never silently dropped into a model).
"""

import contextlib
import logging
import os
import re
from pathlib import Path

import numpy as np

from mobilebert_kit.errors import CheckpointError, ConfigError, first_line, is_int
from mobilebert_kit.utils.safetensors_io import (
    FLOAT_DTYPES, PICKLE_SUFFIXES, read_safetensors_dir, refuse_pickle, safetensors_dtype,
)
from mobilebert_kit.checkpoints.families import (
    CONFIG_NAMES, FAMILIES, HF_ACTIVATIONS, common_fields, family_of, family_of_class, mobilebert_fields,
    no_model_type,
)
from mobilebert_kit.checkpoints.weight_names import reference_name, to_ours
from mobilebert_kit.data.vocab import TOKENIZER_FILES
from mobilebert_kit.utils.quiet import quiet_fd2
from mobilebert_kit.utils.run_state import RUN_FILE, interrupted_run, resume_hint
from mobilebert_kit.utils.structured import load_json

# TensorFlow-free at import: sources/spec.py (checkpoint_format) and pipeline/ import this module without
# TensorFlow (tests/test_sources.py), so the model code and TensorFlow are imported in the functions that use them.

log = logging.getLogger(__name__)

# Buffers and metadata some checkpoints carry that are not weights.
IGNORED_KEYS = ("embeddings.position_ids",)
HEAD_PREFIXES = ("cls.", "classifier.", "qa_outputs.", "cls/", "generator_predictions.", "generator_lm_head.")

# NEZHA-TensorFlow hard-codes the clipping distance in attention_layer (modeling.py: max_relative_position = 64).
NEZHA_TF_MAX_RELATIVE_POSITION = 64

# The official TF1 BertConfig defaults (google-research/mobilebert/modeling.py).
_TF1_DEFAULTS = dict(
    hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, hidden_act="gelu",
    hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=512, type_vocab_size=16,
    initializer_range=0.02, embedding_size=None, trigram_input=False, use_bottleneck=False,
    intra_bottleneck_size=None, use_bottleneck_attention=False, key_query_shared_bottleneck=False,
    num_feedforward_networks=1, normalization_type="layer_norm", classifier_activation=True,
)


def _checked_fields(convert, c, source, names=CONFIG_NAMES):
    """Runs ``convert(c)`` and checks the result against Encoder's field table, before anything is built.

    A missing, mistyped, non-finite or out-of-range field of an untrusted
    config, or a model too large to build, becomes a one-line CheckpointError
    naming the field as the file spells it.
    """
    from mobilebert_kit.models.encoder import check_fields, check_size  # TensorFlow loads only when importing

    if not isinstance(c, dict):
        raise CheckpointError(f"{source} must hold a JSON object, not {type(c).__name__}")
    try:
        config = convert(c)
        check_fields(config, names)
        check_size(config)
    except KeyError as err:
        raise CheckpointError(f"{source} lacks the field {err.args[0]!r}; pass the config the model was trained with") from err
    except ConfigError as err:
        raise CheckpointError(f"{source}: {err}") from err
    except (TypeError, ValueError, OverflowError) as err:
        raise CheckpointError(f"{source} has a field of the wrong type or value ({first_line(err)})") from err
    return config


def config_from_hf(hf):
    """Converts a Hugging Face ``config.json`` dict of a family in ``checkpoints/families.py`` to Encoder arguments.

    Raises CheckpointError (one line) for a config that is not a JSON object or has missing or mistyped fields.

    Example:
        >>> config_from_hf({"model_type": "bert", "hidden_size": 32})["hidden_size"]  # doctest: +SKIP
        32
    """
    model_type = hf.get("model_type") if isinstance(hf, dict) else None
    names = FAMILIES[model_type].config_names if isinstance(model_type, str) and model_type in FAMILIES \
        else CONFIG_NAMES
    return _checked_fields(_config_from_hf, hf, "config.json", names)


# Fields looked up in tables by their value: a list or an object there was a TypeError
# ("unhashable type") before any range check could name the field.
_STRING_FIELDS = ("model_type", "hidden_act", "position_embedding_type", "normalization_type")


def _check_string_fields(config, what):
    for key in _STRING_FIELDS:
        if key in config and not isinstance(config[key], str):
            raise CheckpointError(f"{what}: {key} must be a string, got {type(config[key]).__name__} "
                                  f"{str(config[key])[:40]}; fix the config")


def _config_from_hf(hf):
    _check_string_fields(hf, "config.json")
    family = family_of(hf.get("model_type"))
    c = {**family.defaults, **hf}
    for flag, what in (("is_decoder", "a causal decoder (each token sees only the tokens before it)"),
                       ("add_cross_attention", "a decoder with cross-attention")):
        # The encoders here attend both ways: imported as one, such a checkpoint gave other answers than
        # transformers (2.4e-2 against 6e-7), silently.
        if c.get(flag) is True:
            raise CheckpointError(f"config.json sets {flag}: true, so the checkpoint is {what}, and mbk builds "
                                  "bidirectional encoders only; import an encoder checkpoint (or set it false if the "
                                  "weights were trained as an encoder)")
    act = c[family.activation_field]
    if not isinstance(act, str) or act not in HF_ACTIVATIONS:
        raise CheckpointError(f"unsupported {family.activation_field} {str(act)[:40]!r} in config.json; "
                              f"supported: {', '.join(HF_ACTIVATIONS)}")
    config = common_fields(c, HF_ACTIVATIONS[act], family.config_names)
    config["layer_norm_epsilon"] = c[family.config_names.get("layer_norm_epsilon", "layer_norm_epsilon")]
    config.update(family.encoder_fields(c))
    offset = family.position_offset(c)
    if offset:
        limit = c["max_position_embeddings"]
        if is_int(limit) and limit <= offset:
            # The Encoder's own check would name position_offset, which no config.json has.
            raise CheckpointError(f"config.json: max_position_embeddings ({limit}) leaves no position: "
                                  f"{family.model_type} numbers positions from {offset} (pad_token_id + 1), so the "
                                  f"table needs more than {offset} rows; fix the config")
        config["position_offset"] = offset
    return config


def config_from_tf1(official, source="the TF1 config"):
    """Converts an official (google-research) BERT/MobileBERT JSON config to Encoder arguments; errors name
    ``source`` (the file's path).

    The TF reference code's ``gelu`` is the tanh approximation, so it maps to ``gelu_tanh``.
    """
    return _checked_fields(lambda c: _config_from_tf1(c, source), official, source)


def _config_from_tf1(official, source):
    _check_string_fields(official, source)
    c = {**_TF1_DEFAULTS, **official}
    if "vocab_size" not in official:
        raise CheckpointError(f"{source} has no vocab_size; pass the model's bert_config.json")
    act = {"gelu": "gelu_tanh", "relu": "relu", "relu6": "relu6"}.get(c["hidden_act"])
    if act is None:
        raise CheckpointError(f"unsupported hidden_act {str(c['hidden_act'])[:40]!r} in {source}; supported: gelu, "
                              "relu, relu6")
    config = common_fields(c, act)
    config.update(mobilebert_fields(c))
    config["layer_norm_epsilon"] = 1e-12  # tf.contrib.layers.layer_norm's variance epsilon
    if c.get("use_relative_position"):
        # NEZHA-TensorFlow (huawei-noah): BERT names, no position_embeddings, functional relative positions.
        config["position_embedding_type"] = "relative_functional"
        config["max_relative_position"] = c.get("max_relative_position", NEZHA_TF_MAX_RELATIVE_POSITION)
    return config


def _renamed(arrays, rename, source):
    """``{rename(key): array}``: every normalisation of checkpoint names goes through here.

    Two tensors whose names normalise to one (``pooler.dense.bias`` and
    ``bert.pooler.dense.bias``) are refused naming both: a dict keeps the last
    one, so the other was dropped without ever being reported as unexpected.
    """
    out, origin = {}, {}
    for key, value in arrays.items():
        name = rename(key)
        if name in origin:
            first, second = sorted((origin[name], key))
            raise CheckpointError(
                f"{source} holds both {first!r} and {second!r}, which name the same weight {name!r}; "
                "re-save the checkpoint with only the one the model should use"
            )
        origin[name] = key
        out[name] = value
    return out


def _renamed_prefixes(arrays, renames, source):
    """:func:`_renamed` by ``(their prefix, ours)`` pairs; the first that matches a name applies."""
    def rename(key):
        return next((ours + key[len(theirs):] for theirs, ours in renames if key.startswith(theirs)), key)

    return _renamed(arrays, rename, source)


def _is_float(dtype):
    # bfloat16 (and float8) arrays from a TF1 reader are ml_dtypes types of kind "V", not numpy floating types.
    return dtype.kind == "f" or dtype.name.startswith(("bfloat", "float"))


def _refuse_non_float(origin, source, dialect):
    """Refuses weights stored with an integer or boolean dtype, naming each with its dtype.

    ``assign_weights`` casts whatever it is given: an I32 LayerNorm gamma of the
    right shape imported as 1.07e9 (the bit pattern of 1.0) without a word.
    """
    wrong = [(name, array.dtype) for name, array in origin.items() if not _is_float(array.dtype)]
    if not wrong:
        return
    hf = dialect == "hf"
    named = [f"{name} ({safetensors_dtype(dtype) if hf else dtype.name})" for name, dtype in wrong]
    floats = ", ".join(FLOAT_DTYPES) if hf else "float16, bfloat16, float32, float64"
    more = f" and {len(named) - 3} more" if len(named) > 3 else ""
    raise CheckpointError(
        f"{source} stores {len(wrong)} weight(s) with a non-floating dtype: {', '.join(named[:3])}{more}; "
        f"weights must be one of {floats}: re-convert the checkpoint with floating-point weights"
    )


def _collect(model, arrays, dialect, source, encoder_prefix="", family=None, hf_config=None):
    """Builds ``{our path: array}`` from reference-named ``arrays``; reports all problems at once.

    ``family`` (a Hugging Face :class:`~mobilebert_kit.checkpoints.families.Family`) renames BERT's names to its
    own (from ``hf_config``, its config over its defaults), lists the head weights and unused tensors its
    checkpoints carry, and says whether several of our weights read one tensor (ALBERT's shared layers).
    """
    from mobilebert_kit.models.api import assign_weights, check_finite_weights, named_weights, refuse_misfit

    encoder = model if not encoder_prefix else model.encoder
    config = encoder.config
    remaining = dict(arrays)
    ours, missing, origin = {}, [], {}
    targets = named_weights(model)
    for path, var in targets.items():
        rel = path[len(encoder_prefix):] if encoder_prefix and path.startswith(encoder_prefix) else path
        mapped = reference_name(rel, dialect, config)
        if mapped is not None and family is not None:
            mapped = (family.hf_name(mapped[0], hf_config), mapped[1])
        shared = (family is not None and mapped is not None and mapped[0] in origin
                  and (family.shared_layers or mapped[0] in family.shared_weights))
        if mapped is None or (mapped[0] not in remaining and not shared):
            ours[path] = None
            missing.append(f"missing {mapped[0] if mapped else path} (for {path}, expected shape {list(var.shape)})")
            continue
        name, transpose = mapped
        array = origin[name] if shared else remaining.pop(name)
        ours[path] = to_ours(array, transpose)
        origin[name] = array
    # First: an integer tensor's shape is counted in its own elements, so a "misshaped" report would mislead.
    _refuse_non_float(origin, source, dialect)
    skipped = [k for k in remaining if k.startswith(HEAD_PREFIXES + (family.head_prefixes if family else ()))]
    ignored = set(IGNORED_KEYS) | set(family.unused_keys(config) if family else ())
    unexpected = [k for k in remaining if k not in skipped and k not in ignored]
    refuse_misfit(source, missing, {k: remaining[k] for k in unexpected}, targets,
                  {path: array for path, array in ours.items() if array is not None})
    if skipped:
        log.info("skipped %d head weight(s) of %s (pass head= to keep them)", len(skipped), source)
    check_finite_weights(origin, source, fix="the checkpoint is corrupt or its training diverged; use an earlier one")
    assign_weights(model, ours, source=source, check_finite=False)
    return skipped


# A Hugging Face config's ``architectures`` entry (transformers' class name) -> the head it saved, where the
# weights alone do not tell: `classifier.weight` is a sequence or a token classifier.
# ModernBertForQuestionAnswering names its span head "classifier" (BERT's: qa_outputs, found by its key).
_HF_CLASS_HEADS = (("ForSequenceClassification", "sequence_classifier"), ("ForTokenClassification", "token_classifier"),
                   ("ForQuestionAnswering", "span_question_answerer"))


def _auto_head(keys, architectures):
    """The head a checkpoint holds: from its keys, and for a classifier from the config's ``architectures``."""
    has_mlm = any(k.startswith(("cls.predictions", "cls/predictions")) for k in keys)
    has_nsp = any(k.startswith(("cls.seq_relationship", "cls/seq_relationship")) for k in keys)
    named = [name for suffix, name in _HF_CLASS_HEADS
             for arch in architectures if isinstance(arch, str) and arch.endswith(suffix)]
    if has_mlm and has_nsp:
        return "pretrainer"
    if "qa_outputs.weight" in keys:
        return "span_question_answerer"
    if len(set(named)) == 1 and any(k.startswith("classifier.") for k in keys):
        return named[0]  # a fine-tuned classifier imports with its head (it was dropped: encoder only)
    return None


def _wrap_head(encoder, head, arrays, dialect, architectures=(), problem_type=None):
    """Returns the task model for ``head`` ("auto" picks one from the checkpoint's keys, and for a classifier
    from the config's ``architectures``; ``problem_type``: the config's, which a sequence classifier records: its
    users read a softmax, a sigmoid per label or raw scores, and the export follows it)."""
    from mobilebert_kit.models.heads import HEADS
    from mobilebert_kit.models.sequence_classifier import PROBLEM_TYPES

    if head == "auto":
        head = _auto_head(set(arrays), architectures)
    if head is None:
        return encoder, ""
    if head not in HEADS:
        raise ConfigError(f"unknown head {head!r}; valid heads: auto, {', '.join(HEADS)}")
    kwargs = {}
    if head in ("sequence_classifier", "token_classifier"):
        weight = arrays.get("classifier.weight")
        if weight is None:
            raise CheckpointError(f"head {head!r} needs classifier.weight in the checkpoint; it has none")
        kwargs["num_labels"] = int(weight.shape[0])
    if head == "sequence_classifier" and problem_type is not None:
        if problem_type not in PROBLEM_TYPES:
            raise CheckpointError(f"config.json: problem_type {str(problem_type)[:60]!r} is none of transformers' "
                                  f"{', '.join(PROBLEM_TYPES)}; fix the config")
        kwargs["problem_type"] = problem_type
    return HEADS[head](encoder, **kwargs), "encoder/"


def _family_head(family, head, arrays, architectures, directory, c):
    """``(head, arrays, encoder options)`` with the family's layout of ``head`` applied: its task weights under
    BERT's names, and the Encoder options the head needs (DistilBERT's: a ReLU pooler; ConvBERT's: the
    activation its config ``c``, over the family's defaults, names).
    """
    asked = head
    if head == "auto":
        head = _auto_head(set(arrays), architectures)
    if head is None:
        return None, arrays, {}
    layout = family.head(head)
    if layout.renames:
        arrays = _renamed_prefixes(arrays, layout.renames, directory)
    if asked == "auto" and head in ("sequence_classifier", "token_classifier") and "classifier.weight" not in arrays:
        return None, arrays, {}  # a classifier's name without its weights: the encoder, its keys reported as skipped
    return head, arrays, layout.options(c)


def architectures_of(hf_config, config_file):
    """The class names a Hugging Face config's ``architectures`` lists ([] when absent or null).

    Refused unless a list of strings: transformers iterates the value, so a string is read character by
    character and names no class (``auto_factory``), and here a string dropped a classifier's head (issue 37).

    Example:
        >>> architectures_of({"architectures": ["BertForSequenceClassification"]}, "config.json")
        ['BertForSequenceClassification']
    """
    value = hf_config.get("architectures")
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        shown = f"the {type(value).__name__} {str(value)[:60]!r}" if not isinstance(value, list) else \
            f"a list holding {next(type(n).__name__ for n in value if not isinstance(n, str))}"
        raise CheckpointError(f"{config_file}: architectures is {shown}; write it as a list of class names, as "
                              'transformers saves it (["BertForSequenceClassification"])')
    return list(value)


def _refuse_foreign_weights(family, hf_config, arrays, directory):
    """Refuses, in one line, a checkpoint whose weights are another family's than its ``model_type`` says (users
    relabel ``model_type`` only). Imported as the family the config names, such a checkpoint loads without a
    missing weight and answers wrongly (RoBERTa read as BERT: every position off by two). Each cross-check is read
    from the family records; RoBERTa's ``padding_idx`` position row is zeroed at init and never trained.
    """
    said = f"{directory / 'config.json'} says model_type {family.model_type!r}"
    fix = "set \"model_type\" in config.json to the checkpoint's own type"
    for name in architectures_of(hf_config, directory / "config.json"):
        owner = family_of_class(name)
        if owner is not None and owner != family.model_type:
            raise CheckpointError(f"{said} but its architectures name {name}, a {owner} class; {fix} ({owner})")
    for other in FAMILIES.values():
        if other.prefix != family.prefix and any(k.startswith(other.prefix) for k in arrays):
            kinds = " / ".join(f.model_type for f in FAMILIES.values() if f.prefix == other.prefix)
            raise CheckpointError(f"{said} but its weights are under {other.prefix!r}, the prefix of {kinds} "
                                  f"checkpoints; {fix} ({kinds})")
    c = {**family.defaults, **hf_config}
    offset = family.position_offset(c)
    offset_families = " or ".join(f.model_type for f in FAMILIES.values() if f.position_offset(f.defaults))
    table = arrays.get("embeddings.position_embeddings.weight")
    rows, pad = (np.shape(table)[0] if table is not None and np.ndim(table) == 2 else None), c.get("pad_token_id")
    limit = c.get("max_position_embeddings")
    if offset == 0 and is_int(pad) and is_int(limit) and rows == limit + pad + 1:
        raise CheckpointError(f"{said} but its position table has {rows} rows, max_position_embeddings ({limit}) + "
                              f"pad_token_id ({pad}) + 1: the layout of a family whose positions start at "
                              f"pad_token_id + 1; {fix} ({offset_families})")
    # Only a float table's zeros tell: an int8-stored table (refused by _collect, naming its dtype) rounds every small
    # weight to 0, and was blamed on a RoBERTa-layout position table.
    if offset == 0 and is_int(pad) and rows is not None and 0 <= pad < rows and _is_float(np.asarray(table).dtype) \
            and not np.any(table[pad]):
        raise CheckpointError(f"{said} but row pad_token_id ({pad}) of its position table is all zeros, the padding "
                              f"row a model whose positions start at pad_token_id + 1 never trains, where this "
                              f"family reads it as position {pad}; {fix} ({offset_families})")
    tokenizer_config = _read_json(directory / "tokenizer_config.json")
    tokenizer = tokenizer_config.get("tokenizer_class") or hf_config.get("tokenizer_class")
    if isinstance(tokenizer, str) and not family.accepts_tokenizer(tokenizer):
        owners = [f.model_type for f in FAMILIES.values() if f.accepts_tokenizer(tokenizer)]
        if owners:  # a class no family lists (PreTrainedTokenizerFast, a custom one) tells nothing
            raise CheckpointError(f"{said} but its tokenizer is {tokenizer}, the tokenizer of "
                                  f"{' / '.join(owners)} checkpoints, never of {family.model_type} ones; "
                                  f"{fix} ({' or '.join(owners)})")
    if offset:
        _refuse_other_padding(family, offset, tokenizer_config, directory)


def _refuse_other_padding(family, offset, tokenizer_config, directory):
    """Refuses a tokenizer that pads with another id than the one the family's positions count from
    (``offset - 1``: ids equal to it take no position): every position after left padding would shift, and a
    real token with the config's id would lose its position."""
    if not (directory / "tokenizer.json").is_file():
        return
    special = _read_json(directory / "special_tokens_map.json")
    token = tokenizer_config.get("pad_token") or special.get("pad_token")
    token = token.get("content") if isinstance(token, dict) else token
    if not isinstance(token, str):
        return
    pad_id = _token_id(token, tokenizer_config, directory / "tokenizer.json")
    expected = offset - 1
    if pad_id is not None and pad_id != expected:
        raise CheckpointError(f"{directory / 'tokenizer.json'} pads with {token!r} (id {pad_id}) but {family.model_type} "
                              f"numbers positions from the padding id {expected} (+ 1, config.json's pad_token_id), "
                              f"so every position would move; set pad_token_id in config.json to {pad_id} if the "
                              f"model was trained that way, else fix the tokenizer's pad_token")


def _token_id(token, tokenizer_config, tokenizer_json):
    """The id of ``token``: tokenizer.json's added tokens, tokenizer_config's, then the model's vocabulary."""
    try:
        tokenizer = load_json(tokenizer_json, "tokenizer.json", max_bytes=TOKENIZER_FILES["tokenizer.json"],
                              expect=dict, error=CheckpointError)
    except CheckpointError:
        return None  # the tokenizer's own loader reports a broken file; this check only reads a good one
    for added in tokenizer.get("added_tokens") or ():
        if isinstance(added, dict) and added.get("content") == token and is_int(added.get("id")):
            return added["id"]
    decoder = tokenizer_config.get("added_tokens_decoder")
    if isinstance(decoder, dict):
        for key, added in decoder.items():
            if isinstance(added, dict) and added.get("content") == token and key.isdigit():
                return int(key)
    vocab = (tokenizer.get("model") or {}).get("vocab") if isinstance(tokenizer.get("model"), dict) else None
    if isinstance(vocab, dict):
        return vocab.get(token) if is_int(vocab.get(token)) else None
    if isinstance(vocab, list):  # Unigram: [[piece, score], ...], the id is the index
        return next((i for i, entry in enumerate(vocab) if isinstance(entry, list) and entry[:1] == [token]), None)
    return None


def _built(build, config, config_file):
    """``build(config)``; a refusal no single field's check makes (width and heads) names the config file."""
    try:
        return build(config)
    except ConfigError as err:
        raise ConfigError(f"{config_file}: {err}") from err


@contextlib.contextmanager
def _naming(config_file):
    """A config error raised in the block names ``config_file``, the path: a family's checks
    (``checkpoints/families.py``) know its fields, not where it lies, and said "config.json: ..." of any directory."""
    try:
        yield
    except CheckpointError as err:
        text = str(err)
        if str(config_file) in text:
            raise
        raise CheckpointError(re.sub(r"(?<![\w./-])config\.json\b", lambda _: str(config_file), text, count=1)) \
            from err


def import_hf(directory, head=None, **overrides):
    """Imports a Hugging Face checkpoint directory (``config.json`` + safetensors)."""
    from mobilebert_kit.models.api import build

    directory = Path(directory)
    hf_config = load_json(directory / "config.json", "the Hugging Face config", expect=dict, error=CheckpointError)
    with _naming(directory / "config.json"):
        config = config_from_hf(hf_config)
        family = FAMILIES[hf_config["model_type"]]
        arrays = read_safetensors_dir(directory)
        arrays = _renamed_prefixes(arrays, ((family.prefix, ""),), directory)
        _refuse_foreign_weights(family, hf_config, arrays, directory)
        architectures = architectures_of(hf_config, directory / "config.json")
        head, arrays, head_options = _family_head(family, head, arrays, architectures, directory,
                                                  {**family.defaults, **hf_config})
        config.update(head_options)
        if config.get("classifier_activation") and not any(k.startswith("pooler.") for k in arrays):
            # *ForMaskedLM models are saved without a pooler (add_pooling_layer=False); rather than invent one,
            # the encoder is built without it and pooled_output is the first token.
            log.info("%s has no pooler weights: building the encoder without a pooler", directory)
            config["classifier_activation"] = False
        config.update(overrides)
        encoder = _built(build, config, directory / "config.json")
        model, encoder_prefix = _wrap_head(encoder, head, arrays, "hf", architectures, hf_config.get("problem_type"))
    if family.shared_layers:
        # ALBERT: the encoder has no tied blocks, so each reads its group's tensors (outputs agree to 1e-6).
        log.warning("%s shares its layer weights across %d layers; the imported encoder holds a copy per layer "
                    "(the same outputs, more parameters)", directory, config["num_layers"])
    _collect(model, arrays, "hf", f"{directory}", encoder_prefix, family, {**family.defaults, **hf_config})
    return model


@contextlib.contextmanager
def _quiet_tf_logs():
    """Silences TensorFlow's Python logger (which ``quiet_fd2`` cannot reach when ``sys.stderr`` is not fd 2) and
    native stderr for the block, unless ``MBK_VERBOSE_TF=1``: what it warns about here either resolves (the
    ``.index`` next to it is used) or ends in the one-line error that names the file."""
    if os.environ.get("MBK_VERBOSE_TF") == "1":
        yield
        return
    logger = logging.getLogger("tensorflow")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with quiet_fd2():
            yield
    finally:
        logger.setLevel(level)


TF1_STATE_LIMIT = 1 << 20  # bytes of a TF1 `checkpoint` state file (a real one: a few hundred)


def _tf1_prefix(path):
    """Resolves a TF1 checkpoint prefix from a directory or a ``.index``/``.data`` path."""
    import tensorflow as tf

    path = Path(path)
    if path.is_dir():
        state = path / "checkpoint"
        if os.path.lexists(state):
            # TensorFlow reads the state file whole into memory (a 2 GB one took 6.9 GB and 27 s), and a FIFO for ever.
            if not state.is_file():
                raise CheckpointError(f"{state} is not a regular file; a TF1 checkpoint's state file is a few lines "
                                      "of text: remove or replace it")
            if state.stat().st_size > TF1_STATE_LIMIT:
                raise CheckpointError(f"{state} is {state.stat().st_size:,} bytes; a TF1 checkpoint's state file is a "
                                      f"few lines of text (at most {TF1_STATE_LIMIT:,} bytes here): remove or fix it")
        with _quiet_tf_logs():  # a malformed `checkpoint` file logs two WARNING lines and is then ignored
            latest = tf.train.latest_checkpoint(str(path))
        if latest:
            return latest
        indexes = sorted(path.glob("*.index"))
        return str(indexes[0])[: -len(".index")] if len(indexes) == 1 else None
    text = str(path)
    for suffix in (".index", ".meta"):
        if text.endswith(suffix):
            return text[: -len(suffix)]
    if ".data-" in path.name:
        return text.split(".data-")[0]
    return text if Path(text + ".index").is_file() else None


def import_tf1(prefix, config_path=None, head=None, **overrides):
    """Imports an original (google-research) TF1 name-based checkpoint with its JSON config."""
    from mobilebert_kit.backend import tf
    from mobilebert_kit.models.api import build

    prefix = str(prefix)
    if config_path is None:
        parent = Path(prefix).parent
        candidates = [parent / n for n in ("bert_config.json", "config.json")] + sorted(parent.glob("*config*.json"))
        config_path = next((c for c in candidates if c.is_file()), None)
        if config_path is None:
            raise CheckpointError(f"no JSON config next to {prefix}; pass it with --config (the bert_config.json it was trained with)")
    official = load_json(Path(config_path), "the TF1 config", expect=dict, error=CheckpointError)
    try:
        reader = tf.train.load_checkpoint(prefix)
        shapes = reader.get_variable_to_shape_map()
        arrays = {name: np.asarray(reader.get_tensor(name)) for name in shapes}
    except (tf.errors.OpError, ValueError) as err:
        message = first_line(err)
        raise CheckpointError(f"cannot read TF1 checkpoint {prefix} ({message}); check the files are complete") from err
    # Optimizer slots and counters are not weights.
    arrays = {k: v for k, v in arrays.items() if not k.endswith(("/adam_m", "/adam_v", "/lamb_m", "/lamb_v")) and k != "global_step"}
    config = config_from_tf1(official, config_path)
    config.update(overrides)
    encoder = _built(build, config, config_path)
    model, encoder_prefix = _wrap_head(encoder, head, arrays, "tf1")
    _collect(model, arrays, "tf1", prefix, encoder_prefix)
    return model


def import_checkpoint(path, head=None, config=None, **overrides):
    """Loads an encoder (or task model) from any supported checkpoint.

    Args:
        path: a Hugging Face directory (``config.json`` + ``model.safetensors``),
            an original TF1 checkpoint (prefix, ``.index`` file or directory
            with a ``bert_config.json``), or a directory saved by ``mbk.save``.
        head: ``None`` (encoder only), ``"auto"`` (the head the checkpoint
            holds, if any) or a head name.
        config: path of the JSON config of a TF1 checkpoint (found next to it
            when omitted).
        **overrides: Encoder options that do not change weights
            (``attention_mask_value``, ``output_hidden_states`` ...).

    Returns:
        The loaded model. Pickle checkpoints (``.bin``, ``.pt``) are refused.

    Example:
        >>> import mobilebert_kit as mbk
        >>> encoder = mbk.import_checkpoint("all-MiniLM-L6-v2/")  # doctest: +SKIP
    """
    from mobilebert_kit.models.api import check_path_argument, load

    check_path_argument(path, "a checkpoint path")

    kind, location = checkpoint_format(path)
    if kind == "saved":
        return load(location, **overrides)
    if kind == "hf":
        return import_hf(location, head=head, **overrides)
    return import_tf1(location, config_path=config, head=head, **overrides)


def checkpoint_format(path):
    """What kind of checkpoint ``path`` is, without loading it: the one place that tells formats apart.

    Args:
        path (str | Path): a directory, a ``.safetensors`` file, or a TF1 prefix / ``.index`` / ``.data-*`` path.

    Returns:
        tuple[str, Path | str]: ``("saved", directory)`` (``mbk.save``), ``("hf", directory)``
        (``config.json`` with a ``model_type`` + safetensors) or ``("tf1", prefix)``.

    Raises:
        CheckpointError: a pickle checkpoint (refused: unpickling runs code), or nothing loadable.

    Example:
        >>> checkpoint_format("all-MiniLM-L6-v2/")  # doctest: +SKIP
        ('hf', PosixPath('all-MiniLM-L6-v2'))
    """
    from mobilebert_kit.models.api import is_saved_model

    path = Path(path)
    if path.suffix in PICKLE_SUFFIXES and path.is_file():
        refuse_pickle(path)
    if path.is_dir() and is_saved_model(path):
        return "saved", path
    if path.is_dir() and (path / "config.json").is_file() and "model_type" in _read_json(path / "config.json"):
        return "hf", path
    if path.suffix == ".safetensors" and path.is_file():
        return "hf", path.parent
    prefix = _tf1_prefix(path) if (path.exists() or Path(str(path) + ".index").exists()) else None
    if prefix is not None:
        return "tf1", prefix
    if path.is_dir():
        pickles = sorted(p for p in path.iterdir() if p.suffix in PICKLE_SUFFIXES)
        if pickles:
            refuse_pickle(pickles[0])
    if path.is_dir() and (path / "model").is_dir() and is_saved_model(path / "model"):
        # `mbk finetune --out DIR` keeps the model one level down, next to task.json: DIR names it unambiguously,
        # and DIR/model holds everything a client needs (vocabulary, labels), so DIR is read as DIR/model.
        return "saved", path / "model"
    if path.is_dir() and (path / "student").is_dir() and is_saved_model(path / "student"):
        # `mbk distill --out DIR` writes the distilled encoder to DIR/student (the docs' next step fine-tunes it).
        return "saved", path / "student"
    if path.is_dir() and interrupted_run(path):
        raise CheckpointError(resume_hint(path))
    if path.is_dir() and (path / RUN_FILE).is_file() and (path / "checkpoints").is_dir():
        # A distillation run's state (training/run_directory.py) before it wrote DIR/student.
        raise CheckpointError(f"{path} holds an unfinished distillation run, not a model yet; finish it with "
                              f"`mbk distill --out {path} --resume`, then use {path / 'student'}")
    if path.is_dir() and (path / "config.json").is_file():
        # A config.json that is no JSON object (truncated, nested past the bound, not UTF-8) says so, rather than
        # "not a checkpoint" with the file right there.
        load_json(path / "config.json", "config.json", expect=dict, error=CheckpointError,
                  fix="restore the checkpoint's config.json")
        if any((path / name).is_file() for name in ("model.safetensors", "model.safetensors.index.json")):
            # Both files are there: only the model_type that marks a Hugging Face config is not.
            raise CheckpointError(no_model_type(path / "config.json"))
    if path.is_dir():
        # A config.json or model.safetensors that is there but no regular file (a directory, a FIFO, a link to a
        # device) was reported as missing: "not a checkpoint: expected config.json + model.safetensors".
        for name in ("config.json", "model.safetensors"):
            if os.path.lexists(path / name) and not (path / name).is_file():
                raise CheckpointError(f"{path / name} is not a regular file; replace it with the checkpoint's {name}")
    if path.exists():
        raise CheckpointError(
            f"{path} is not a checkpoint: expected config.json + model.safetensors (Hugging Face), "
            "a TF1 checkpoint (*.index + bert_config.json) or a directory saved by mbk"
        )
    raise CheckpointError(f"{path} does not exist; pass a checkpoint directory or TF1 checkpoint prefix")


def _read_json(path):
    """The JSON object in ``path``, or {} when it is not one (the caller then tries other formats)."""
    try:
        return load_json(Path(path), "config.json", expect=dict, error=CheckpointError)
    except CheckpointError:
        return {}
