"""BertPretrainer: masked LM + next-sentence prediction (BERT; MobileBERT's pre-training heads)."""

from mobilebert_kit.backend import keras
from mobilebert_kit.models.masked_lm_head import MaskedLMHead
from mobilebert_kit.models.task_model import TaskModel, head_initializer, task_inputs


class BertPretrainer(TaskModel):
    """Masked LM + next-sentence prediction (BERT; MobileBERT's pre-training heads).

    Outputs ``mlm_logits`` ``[batch, seq, vocab]``, ``nsp_logits`` ``[batch, 2]``,
    ``sequence_output`` and ``pooled_output``.

    Args:
        encoder: an :class:`~mobilebert_kit.models.encoder.Encoder`.

    Example:
        >>> model = BertPretrainer(mbk.build("tiny-mobilebert"))  # doctest: +SKIP
    """

    architecture = "pretrainer"

    def __init__(self, encoder, name="pretrainer", **kwargs):
        cfg = encoder.config
        mlm = MaskedLMHead(
            encoder.embedding_table,
            hidden_size=cfg["hidden_size"],
            hidden_act=cfg["hidden_act"],
            layer_norm_epsilon=cfg["layer_norm_epsilon"],
            initializer_range=cfg["initializer_range"],
            name="mlm",
        )
        nsp = keras.layers.Dense(2, kernel_initializer=head_initializer(encoder), name="nsp")
        inputs = task_inputs()
        enc = encoder(inputs)
        outputs = {
            "mlm_logits": mlm(enc["sequence_output"]),
            "nsp_logits": nsp(enc["pooled_output"]),
            "sequence_output": enc["sequence_output"],
            "pooled_output": enc["pooled_output"],
        }
        super().__init__(inputs=inputs, outputs=outputs, name=name, **kwargs)
        self._finish(encoder, {})
