"""SpanQuestionAnswerer: span QA (SQuAD): start and end logits per token."""

from mobilebert_kit.backend import tf
from mobilebert_kit.layers.token_dense import TokenDense
from mobilebert_kit.models.task_model import TaskModel, head_initializer, task_inputs


class SpanQuestionAnswerer(TaskModel):
    """Span QA (SQuAD): start and end logits per token.

    Outputs ``start_logits`` and ``end_logits`` ``[batch, seq]``.

    Args:
        encoder: the encoder.

    Example:
        >>> model = SpanQuestionAnswerer(mbk.build("tiny-bert"))  # doctest: +SKIP
    """

    architecture = "span_question_answerer"

    def __init__(self, encoder, name="span_question_answerer", **kwargs):
        inputs = task_inputs()
        seq = encoder(inputs)["sequence_output"]
        logits = TokenDense(2, kernel_initializer=head_initializer(encoder), name="qa_outputs")(seq)  # (B, S, 2)
        start, end = tf.unstack(logits, axis=-1)
        super().__init__(inputs=inputs, outputs={"start_logits": start, "end_logits": end}, name=name, **kwargs)
        self._finish(encoder, {})
