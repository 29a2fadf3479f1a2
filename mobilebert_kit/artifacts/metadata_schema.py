"""The parts of the TFLite Metadata schema that mobilebert-kit writes and reads, declared once.

The app-side clients read a ``TFLITE_METADATA`` entry: a ``ModelMetadata`` flatbuffer (identifier ``M001``)
defined by tflite-support's ``metadata_schema.fbs``. The writer (:mod:`mobilebert_kit.convert.tflite.metadata`)
and the reader (:mod:`mobilebert_kit.artifacts.client_metadata`) take the field slots and enum values from here.
Slots are zero-based field positions (a union field takes two: its ``_type`` byte, then the value); the schema
only appends fields, so they hold for every version since 1.1.0. Standard library only.

Example:
    >>> SLOTS["TensorMetadata"]["name"], ASSOCIATED_FILE_TYPES["VOCABULARY"]
    (0, 5)
"""

from typing import NamedTuple

TFLITE_METADATA = "TFLITE_METADATA"  # the Model.metadata entry the clients read
FILE_IDENTIFIER = b"M001"
# BertTokenizerOptions and SubGraphMetadata.input_process_units arrived in schema 1.1.0 (the schema's history).
MIN_PARSER_VERSION = "1.1.0"

# Metadata names of the three inputs, in graph order: the TFLite clients find the inputs by these names
# ("ids", "mask", "segment_ids"); other names give "Input tensor indices form the set {-1, -1, -1}".
CLIENT_INPUT_NAMES = ("ids", "mask", "segment_ids")
VOCAB_FILE = "vocab.txt"
LABELS_FILE = "labels.txt"

SLOTS = {
    "ModelMetadata": {"name": 0, "description": 1, "version": 2, "subgraph_metadata": 3, "author": 4,
                      "license": 5, "associated_files": 6, "min_parser_version": 7},
    "SubGraphMetadata": {"name": 0, "description": 1, "input_tensor_metadata": 2, "output_tensor_metadata": 3,
                         "associated_files": 4, "input_process_units": 5, "output_process_units": 6},
    "TensorMetadata": {"name": 0, "description": 1, "dimension_names": 2, "content": 3, "process_units": 4,
                       "stats": 5, "associated_files": 6},
    "Content": {"content_properties_type": 0, "content_properties": 1, "range": 2},
    "ProcessUnit": {"options_type": 0, "options": 1},
    "BertTokenizerOptions": {"vocab_file": 0},
    "SentencePieceTokenizerOptions": {"sentencePiece_model": 0, "vocab_file": 1},
    "RegexTokenizerOptions": {"delim_regex_pattern": 0, "vocab_file": 1},
    "AssociatedFile": {"name": 0, "description": 1, "type": 2, "locale": 3},
}

ASSOCIATED_FILE_TYPES = {"UNKNOWN": 0, "DESCRIPTIONS": 1, "TENSOR_AXIS_LABELS": 2, "TENSOR_VALUE_LABELS": 3,
                         "TENSOR_AXIS_SCORE_CALIBRATION": 4, "VOCABULARY": 5, "SCANN_INDEX_FILE": 6}
# union ProcessUnitOptions (0 is NONE); the tokenizers are the last three.
PROCESS_UNIT_OPTIONS = {"NormalizationOptions": 1, "ScoreCalibrationOptions": 2, "ScoreThresholdingOptions": 3,
                        "BertTokenizerOptions": 4, "SentencePieceTokenizerOptions": 5, "RegexTokenizerOptions": 6}


class ProcessUnitTokenizer(NamedTuple):
    """A tokenizer process unit: how ``mbk inspect`` names it, and how its packed file reads (``"lines"``: a
    vocabulary, one token a line; ``"model"``: a binary SentencePiece model; None: the clients run no text model
    with it, so mbk reads no file of it)."""

    name: str
    packed: str = None


# The tokenizer a process unit declares, by its options type.
TOKENIZERS = {"BertTokenizerOptions": ProcessUnitTokenizer("bert", "lines"),
              "SentencePieceTokenizerOptions": ProcessUnitTokenizer("sentencepiece", "model"),
              "RegexTokenizerOptions": ProcessUnitTokenizer("regex")}
# How each named tokenizer's packed file reads (None for an unknown name or none).
PACKED_AS = {unit.name: unit.packed for unit in TOKENIZERS.values()}
# union ContentProperties (0 is NONE). The clients' own writers give every text-model tensor FeatureProperties.
CONTENT_PROPERTIES = {"FeatureProperties": 1, "ImageProperties": 2, "BoundingBoxProperties": 3, "AudioProperties": 4}
