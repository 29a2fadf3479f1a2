"""SequenceClassifier: classification or regression from the pooled output (``num_labels=1`` regresses)."""

from mobilebert_kit.backend import keras
from mobilebert_kit.layers.keyed_dropout import KeyedDropout
from mobilebert_kit.models.task_model import TaskModel, head_initializer, task_inputs


class SequenceClassifier(TaskModel):
    """Classification or regression from the pooled output (``num_labels=1`` regresses).

    Outputs ``logits`` ``[batch, num_labels]``.

    Args:
        encoder: the encoder.
        num_labels: number of classes (1 for regression).
        dropout: dropout before the classifier.
        multi_label: the labels are independent (transformers' ``problem_type`` ``multi_label_classification``:
            one sigmoid per label, not a softmax over them); recorded for the export, the logits are the same.

    Example:
        >>> model = SequenceClassifier(mbk.build("tiny-bert"), num_labels=3)  # doctest: +SKIP
    """

    architecture = "sequence_classifier"

    def __init__(self, encoder, num_labels=2, dropout=0.1, multi_label=False, name="sequence_classifier", **kwargs):
        inputs = task_inputs()
        pooled = encoder(inputs)["pooled_output"]
        pooled = KeyedDropout(dropout, name="classifier_dropout")(pooled)
        logits = keras.layers.Dense(num_labels, kernel_initializer=head_initializer(encoder), name="classifier")(pooled)
        super().__init__(inputs=inputs, outputs={"logits": logits}, name=name, **kwargs)
        # multi_label is recorded only when set: a single-label classifier's saved config is unchanged.
        head = {"num_labels": num_labels, "dropout": dropout}
        self._finish(encoder, {**head, "multi_label": True} if multi_label else head)
