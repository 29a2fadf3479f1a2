"""TokenClassifier: token tagging (NER, POS): logits per token."""

from mobilebert_kit.layers.keyed_dropout import KeyedDropout
from mobilebert_kit.layers.token_dense import TokenDense
from mobilebert_kit.models.task_model import TaskModel, head_initializer, task_inputs


class TokenClassifier(TaskModel):
    """Token tagging (NER, POS): logits per token.

    Outputs ``logits`` ``[batch, seq, num_labels]``.

    Args:
        encoder: the encoder.
        num_labels: number of tags.
        dropout: dropout before the classifier.

    Example:
        >>> model = TokenClassifier(mbk.build("tiny-bert"), num_labels=9)  # doctest: +SKIP
    """

    architecture = "token_classifier"

    def __init__(self, encoder, num_labels=2, dropout=0.1, name="token_classifier", **kwargs):
        inputs = task_inputs()
        seq = encoder(inputs)["sequence_output"]
        seq = KeyedDropout(dropout, name="classifier_dropout")(seq)
        logits = TokenDense(num_labels, kernel_initializer=head_initializer(encoder), name="classifier")(seq)
        super().__init__(inputs=inputs, outputs={"logits": logits}, name=name, **kwargs)
        self._finish(encoder, {"num_labels": num_labels, "dropout": dropout})
