"""Task models: an encoder plus a head, each a functional Keras model.

One class per task (pre-training, sequence classification, span QA, token
classification); each takes the encoder and the head's own options, returns a
dict of named outputs and keeps the encoder's outputs alongside. ``mbk.save``
stores ``architecture`` + ``head_config`` so ``mbk.load`` rebuilds the same.
"""

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.models.encoder import INPUT_NAMES
from mobilebert_kit.models.masked_lm_head import MaskedLMHead


def _inputs():
    return {n: keras.Input(shape=(None,), dtype="int32", name=n) for n in INPUT_NAMES}


def _init(encoder):
    return keras.initializers.TruncatedNormal(stddev=encoder.config["initializer_range"])


class _TaskModel(keras.Model):
    architecture = None

    def _finish(self, encoder, head_config):
        self.encoder = encoder
        self.head_config = dict(head_config)

    @property
    def config(self):
        return {"encoder": self.encoder.config, "head": dict(self.head_config)}

    def dummy_inputs(self, batch_size=1, seq_len=8, seed=0):
        return self.encoder.dummy_inputs(batch_size, seq_len, seed)


class BertPretrainer(_TaskModel):
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
        nsp = keras.layers.Dense(2, kernel_initializer=_init(encoder), name="nsp")
        inputs = _inputs()
        enc = encoder(inputs)
        outputs = {
            "mlm_logits": mlm(enc["sequence_output"]),
            "nsp_logits": nsp(enc["pooled_output"]),
            "sequence_output": enc["sequence_output"],
            "pooled_output": enc["pooled_output"],
        }
        super().__init__(inputs=inputs, outputs=outputs, name=name, **kwargs)
        self._finish(encoder, {})


class SequenceClassifier(_TaskModel):
    """Classification or regression from the pooled output (``num_labels=1`` regresses).

    Outputs ``logits`` ``[batch, num_labels]``.

    Args:
        encoder: the encoder.
        num_labels: number of classes (1 for regression).
        dropout: dropout before the classifier.

    Example:
        >>> model = SequenceClassifier(mbk.build("tiny-bert"), num_labels=3)  # doctest: +SKIP
    """

    architecture = "sequence_classifier"

    def __init__(self, encoder, num_labels=2, dropout=0.1, name="sequence_classifier", **kwargs):
        inputs = _inputs()
        pooled = encoder(inputs)["pooled_output"]
        pooled = keras.layers.Dropout(dropout, name="classifier_dropout")(pooled)
        logits = keras.layers.Dense(num_labels, kernel_initializer=_init(encoder), name="classifier")(pooled)
        super().__init__(inputs=inputs, outputs={"logits": logits}, name=name, **kwargs)
        self._finish(encoder, {"num_labels": num_labels, "dropout": dropout})


class SpanQuestionAnswerer(_TaskModel):
    """Span QA (SQuAD): start and end logits per token.

    Outputs ``start_logits`` and ``end_logits`` ``[batch, seq]``.

    Args:
        encoder: the encoder.

    Example:
        >>> model = SpanQuestionAnswerer(mbk.build("tiny-bert"))  # doctest: +SKIP
    """

    architecture = "span_question_answerer"

    def __init__(self, encoder, name="span_question_answerer", **kwargs):
        inputs = _inputs()
        seq = encoder(inputs)["sequence_output"]
        logits = keras.layers.Dense(2, kernel_initializer=_init(encoder), name="qa_outputs")(seq)  # (B, S, 2)
        start, end = tf.unstack(logits, axis=-1)
        super().__init__(inputs=inputs, outputs={"start_logits": start, "end_logits": end}, name=name, **kwargs)
        self._finish(encoder, {})


class TokenClassifier(_TaskModel):
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
        inputs = _inputs()
        seq = encoder(inputs)["sequence_output"]
        seq = keras.layers.Dropout(dropout, name="classifier_dropout")(seq)
        logits = keras.layers.Dense(num_labels, kernel_initializer=_init(encoder), name="classifier")(seq)
        super().__init__(inputs=inputs, outputs={"logits": logits}, name=name, **kwargs)
        self._finish(encoder, {"num_labels": num_labels, "dropout": dropout})


HEADS = {cls.architecture: cls for cls in (BertPretrainer, SequenceClassifier, SpanQuestionAnswerer, TokenClassifier)}
