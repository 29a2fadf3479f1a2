"""Task models by architecture name (an encoder plus a head), one class per file.

``mbk.save`` stores ``architecture`` + the head's config so that ``mbk.load``
rebuilds the same model from ``HEADS``.
"""

from mobilebert_kit.models.bert_pretrainer import BertPretrainer
from mobilebert_kit.models.sequence_classifier import SequenceClassifier
from mobilebert_kit.models.span_question_answerer import SpanQuestionAnswerer
from mobilebert_kit.models.task_model import TaskModel
from mobilebert_kit.models.token_classifier import TokenClassifier

HEADS = {cls.architecture: cls for cls in (BertPretrainer, SequenceClassifier, SpanQuestionAnswerer, TokenClassifier)}

__all__ = ["HEADS", "BertPretrainer", "SequenceClassifier", "SpanQuestionAnswerer", "TaskModel", "TokenClassifier"]
