"""Every export task, one record each: which outputs a file carries, named as its clients expect.

An *export task* is what the exported file is for, seen from the app: a
sentence embedder, a classifier, a span question answerer, raw features. The
task decides the graph's outputs (``embedding`` pools and normalizes in the
graph; ``classification`` applies softmax for TFLite, whose clients read the
first output as scores in [0, 1], ``multi_label_classification`` a sigmoid per
label) and how each format names them (optimum's
names for ONNX, the TFLite Task Library's for TFLite); the TFLite Metadata
written for the clients follows :attr:`ExportTask.client`.

Outputs are computed under *canonical* names (``convert/export_model.py``) and
exported under each format's name; the pair list keeps the export order.

What the clients require is in ``shared/reference/clients.md`` (measured by
loading files into MediaPipe 1.2.2 / 0.10.21, tflite-support 0.4.4 and
onnxruntime 1.31).

Standard library only: the CLI registers ``--task`` from here without loading
TensorFlow.

Example:
    >>> export_task("classification").output_names("tflite")
    ('probability',)
    >>> export_task("embedding").output_names("onnx")
    ('last_hidden_state', 'sentence_embedding')
"""

from dataclasses import dataclass, field

from mobilebert_kit.artifacts.formats import FORMATS  # the export plan reads the format's one record from here
from mobilebert_kit.errors import check_choice

# models.encoder.INPUT_NAMES, in export order, repeated so that reading data files, recipes and plans does not
# import TensorFlow (tests/convert/test_recipes.py checks that the two agree).
GRAPH_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def graph_inputs(fmt, type_vocab_size, token_types=None):
    """The inputs of an exported graph, in order: what its clients feed.

    TFLite files take all three: MediaPipe's and the Task Library's ``BertPreprocessor`` fill ids, mask and
    segment ids for every model. An ONNX file takes what the checkpoint's tokenizer returns, as optimum's
    exports do: transformers' tokenizers of RoBERTa, XLM-R, DistilBERT and MPNet return no
    ``token_type_ids`` (``data.tokenizer_kinds.returns_token_types``), so optimum-style code feeding
    ``tokenizer(text)`` would be refused by a graph that requires them; without the input every token reads
    type 0, as transformers does when none is given. A model with one token type or none takes none either.
    ``token_types``: whether the checkpoint's tokenizer returns ``token_type_ids`` (None: unknown).
    """
    if not FORMATS[fmt].every_input and (int(type_vocab_size or 0) <= 1 or token_types is False):
        return GRAPH_INPUTS[:2]
    return GRAPH_INPUTS


POOLINGS = ("mean", "cls")


@dataclass(frozen=True)
class ExportTask:
    """One export task.

    Args:
        name (str): the ``--task`` value.
        architectures (tuple): source architectures (``convert.prepare.rebuild.architecture_of``) it exports from.
        outputs (dict): per format, ``((exported name, canonical name), ...)`` in export order.
        client (str | None): the TFLite client family the metadata targets: ``"embedder"``,
            ``"classifier"``, ``"question_answerer"``, or None (metadata with the tokenizer only).
        one_output (bool | None): True: only heads with one output column (a regressor); False:
            only heads with several (softmax over one column reads 1.0 for every input); None: any.
        problem_types (tuple | None): the sequence heads' problem types it answers (transformers'
            ``problem_type``, declared or inferred: ``sequence_classifier.problem_of``); a head of another one is
            refused, naming its task: a softmax over independent labels or over regression scores answers
            something else than the model's users read. None: any head.
        default_seq_len (dict): per format, a sequence length other than the export default
            (the Task Library's BertQuestionAnswerer requires 384).
        quantized_min_cosine (float | None): the least mean cosine a quantized file's outputs must keep, above a
            mode's looser generic bar: an embedding's cosine to its float vector is the task's own measure
            (retrieval ranks by it), where a classifier's logit cosine is only a proxy.
        per_text_outputs (bool): every output is one per text (a vector, class scores), none follows the text's
            length. Such a TFLite file is dynamic-length by default; one with an output of the text's length
            stays static unless ``--dynamic-axes`` is asked: MediaPipe copies a dynamic file's outputs into
            tensors of the model's default shape and fails ("TfLiteTensor and Tensor shape do not match: ...
            [1, 5, 32] vs. [1, 1, 32]", tests/convert/test_tflite_metadata.py), and the Task Library's
            BertQuestionAnswerer never resizes.
        description (str): one line for ``--help`` and the docs.
    """

    name: str
    architectures: tuple
    outputs: dict
    client: str = None
    one_output: bool = None
    problem_types: tuple = None
    default_seq_len: dict = field(default_factory=dict)
    quantized_min_cosine: float = None
    per_text_outputs: bool = False
    description: str = ""

    def output_names(self, fmt):
        """The exported output names for ``fmt``, in order."""
        return tuple(name for name, _ in self.outputs[fmt])

    def canonical(self, fmt):
        """``{exported name: canonical name}`` for ``fmt``."""
        return dict(self.outputs[fmt])


_ENCODERS = ("encoder", "pretrainer", "sequence_classifier", "token_classifier", "span_question_answerer")

TASKS = {
    task.name: task
    for task in (
        ExportTask(
            "features", _ENCODERS,
            {"tflite": (("sequence_output", "sequence_output"), ("pooled_output", "pooled_output")),
             "onnx": (("last_hidden_state", "sequence_output"), ("pooler_output", "pooled_output"))},
            description="the encoder's hidden states (optimum's feature-extraction)",
        ),
        ExportTask(
            "embedding", _ENCODERS,
            {"tflite": (("sentence_embedding", "sentence_embedding"),),
             "onnx": (("last_hidden_state", "sequence_output"), ("sentence_embedding", "sentence_embedding"))},
            # Full int8 of all-MiniLM-L6-v2 with its LayerNorms float passed int8's generic 0.9 at 0.904, and gave
            # 0.90 in MediaPipe where the fallback's file gave 0.984 (benchmarks/RESULTS.md, LayerNorm models).
            client="embedder", quantized_min_cosine=0.95, per_text_outputs=True,
            description="one sentence vector: the checkpoint's declared pooling (--pooling otherwise)",
        ),
        ExportTask(
            "classification", ("sequence_classifier",),
            {"tflite": (("probability", "probabilities"),), "onnx": (("logits", "logits"),)},
            client="classifier", one_output=False, problem_types=("single_label_classification",),
            per_text_outputs=True, description="class probabilities (TFLite) / logits (ONNX) of a sequence classifier",
        ),
        ExportTask(
            "multi_label_classification", ("sequence_classifier",),
            {"tflite": (("probability", "label_probabilities"),), "onnx": (("logits", "logits"),)},
            client="classifier", problem_types=("multi_label_classification",), per_text_outputs=True,
            description="one sigmoid probability per label (TFLite) / logits (ONNX) of a multi-label classifier",
        ),
        ExportTask(
            "regression", ("sequence_classifier",),
            {"tflite": (("score", "logits"),), "onnx": (("logits", "logits"),)},
            problem_types=("regression",), per_text_outputs=True,
            description="the raw scores of a regression sequence head (one or several targets), e.g. STS-B "
                        "similarity",
        ),
        ExportTask(
            "token_classification", ("token_classifier",),
            {"tflite": (("logits", "logits"),), "onnx": (("logits", "logits"),)},
            description="per-token logits of a token classifier",
        ),
        ExportTask(
            "span_qa", ("span_question_answerer",),
            {"tflite": (("start_logits", "start_logits"), ("end_logits", "end_logits")),
             "onnx": (("start_logits", "start_logits"), ("end_logits", "end_logits"))},
            client="question_answerer", default_seq_len={"tflite": 384},
            description="start/end logits of a span question answerer (TFLite: 384 tokens by default)",
        ),
        ExportTask(
            "pretraining", ("pretrainer",),
            {fmt: (("mlm_logits", "mlm_logits"), ("nsp_logits", "nsp_logits"),
                   ("sequence_output", "sequence_output"), ("pooled_output", "pooled_output"))
             for fmt in FORMATS},
            description="masked-LM and next-sentence logits with the hidden states",
        ),
    )
}

# The task a source exports as when --task is auto, by its architecture. An encoder whose checkpoint
# declares a sentence-transformers pooling exports as "embedding" instead (sources decide that).
AUTO_TASK = {
    "encoder": "features",
    "pretrainer": "pretraining",
    "sequence_classifier": "classification",
    "token_classifier": "token_classification",
    "span_question_answerer": "span_qa",
}
# ... and of a sequence head, by the problem its logits answer (``sequence_classifier.problem_of``: transformers'
# problem_type, or one output column for a regressor).
AUTO_TASK_BY_PROBLEM = {"single_label_classification": "classification",
                        "multi_label_classification": "multi_label_classification", "regression": "regression"}


def export_task(name):
    """The :class:`ExportTask` named ``name`` (a one-line ConfigError naming the choices otherwise)."""
    check_choice("task", name, tuple(TASKS))
    return TASKS[name]
