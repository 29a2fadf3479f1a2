"""SequenceClassifier: classification or regression from the pooled output (``num_labels=1`` regresses)."""

from mobilebert_kit.backend import keras
from mobilebert_kit.errors import check_choice
from mobilebert_kit.layers.keyed_dropout import KeyedDropout
from mobilebert_kit.models.task_model import TaskModel, head_initializer, task_inputs


class SequenceClassifier(TaskModel):
    """Classification or regression from the pooled output (``num_labels=1`` regresses).

    Outputs ``logits`` ``[batch, num_labels]``.

    Args:
        encoder: the encoder.
        num_labels: number of classes (1 for regression).
        dropout: dropout before the classifier.
        problem_type: what the logits answer, as transformers' config names it (:data:`PROBLEM_TYPES`); None: as
            transformers infers it, ``regression`` for one label, else ``single_label_classification``. Recorded
            for the export (a softmax, a sigmoid per label or the raw scores); the logits are the same.

    Example:
        >>> model = SequenceClassifier(mbk.build("tiny-bert"), num_labels=3)  # doctest: +SKIP
    """

    architecture = "sequence_classifier"

    def __init__(self, encoder, num_labels=2, dropout=0.1, problem_type=None, name="sequence_classifier", **kwargs):
        if problem_type is not None:
            check_choice("problem_type", problem_type, PROBLEM_TYPES)
        inputs = task_inputs()
        pooled = encoder(inputs)["pooled_output"]
        pooled = KeyedDropout(dropout, name="classifier_dropout")(pooled)
        logits = keras.layers.Dense(num_labels, kernel_initializer=head_initializer(encoder), name="classifier")(pooled)
        super().__init__(inputs=inputs, outputs={"logits": logits}, name=name, **kwargs)
        # problem_type is recorded only when set: an undeclared classifier's saved config is unchanged.
        head = {"num_labels": num_labels, "dropout": dropout}
        self._finish(encoder, {**head, "problem_type": problem_type} if problem_type else head)


# transformers' problem types of a sequence classifier (``PretrainedConfig.problem_type``): a softmax over the
# classes, one sigmoid per independent label, or raw scores (one or several regression targets).
PROBLEM_TYPES = ("single_label_classification", "multi_label_classification", "regression")


def problem_of(head_config):
    """The problem a sequence classifier's logits answer: its recorded ``problem_type``, else transformers' inference
    from the label count.

    Example:
        >>> problem_of({"num_labels": 1}), problem_of({"num_labels": 3, "problem_type": "regression"})
        ('regression', 'regression')
    """
    fallback = "regression" if head_config.get("num_labels") == 1 else "single_label_classification"
    return head_config.get("problem_type") or fallback
