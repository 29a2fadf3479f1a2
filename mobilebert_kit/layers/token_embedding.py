"""TokenEmbedding: word (optionally trigram), position and token-type embeddings."""

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.layers.token_dense import TokenDense
from mobilebert_kit.layers.keyed_dropout import KeyedDropout
from mobilebert_kit.errors import ConfigError, check_choice
from mobilebert_kit.layers.normalization import make_norm

POSITION_EMBEDDING_TYPES = ("absolute", "none")
# Where the embedding_size -> hidden_size projection sits (when the sizes differ):
#   before_norm: project the word vectors, add hidden-wide position/type tables, norm (MobileBERT, BERT-small*)
#   after_norm: add embedding-wide tables, norm, dropout, then project (ELECTRA/ConvBERT ``embeddings_project``)
EMBEDDING_PROJECTIONS = ("before_norm", "after_norm")


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class TokenEmbedding(keras.layers.Layer):
    """Embeds token ids into ``[batch, seq, hidden_size]``.

    With ``trigram_input`` the ``embedding_size``-wide word vectors of positions
    t+1, t and t-1 (zero padded at the ends) are concatenated and projected to
    ``hidden_size`` by ``embedding_transformation``: MobileBERT's "3-convolution"
    over a 128-d table (Sun et al., 2020, Sec. 4.2; concatenation order as in the
    official code, parity-notes.md). Without it, a projection is still applied
    when ``embedding_size != hidden_size`` (factorized embeddings). Position and
    token-type embeddings are added, then the norm and dropout. With
    ``embedding_projection="after_norm"`` the position and token-type tables are
    ``embedding_size`` wide, the norm runs at that width and the projection
    comes last: the ELECTRA layout that ConvBERT and the composite-attention
    models inherit (Hugging Face ``ConvBertModel.embeddings_project``).

    Args:
        vocab_size: number of word pieces.
        embedding_size: width of the word embedding table.
        hidden_size: output width.
        max_position_embeddings: rows of the absolute position table.
        type_vocab_size: number of token types (segments).
        trigram_input: use the trigram concatenation before the projection.
        position_embedding_type: ``"absolute"`` (learned table) or ``"none"``
            (for encoders with relative positions inside attention).
        normalization_type: ``"layer_norm"`` or ``"no_norm"``.
        layer_norm_epsilon: LayerNorm epsilon.
        dropout: dropout rate on the output.
        initializer_range: stddev of the truncated-normal table initializer.
        embedding_projection: ``"before_norm"`` (default) or ``"after_norm"``.
        position_offset: row of the position table that the first token reads
            (default 0). RoBERTa and XLM-R start at ``pad_token_id + 1`` (2):
            their tables have ``max_position_embeddings`` rows, of which
            ``max_position_embeddings - position_offset`` are reachable.
        norm_use_bias: the LayerNorm has a beta (default); False: ModernBERT's ``norm_bias: false``.
        **kwargs: standard layer arguments.

    Example:
        >>> emb = TokenEmbedding(100, 16, 32, 64, 2, trigram_input=True, name="embeddings")
        >>> ids = tf.constant([[5, 6, 7]])
        >>> emb(ids, tf.zeros_like(ids)).shape
        TensorShape([1, 3, 32])
    """

    def __init__(
        self,
        vocab_size,
        embedding_size,
        hidden_size,
        max_position_embeddings=512,
        type_vocab_size=2,
        trigram_input=False,
        position_embedding_type="absolute",
        normalization_type="layer_norm",
        layer_norm_epsilon=1e-12,
        dropout=0.0,
        initializer_range=0.02,
        embedding_projection="before_norm",
        position_offset=0,
        norm_use_bias=True,
        **kwargs,
    ):
        self._embedding_config = {k: v for k, v in locals().items() if k not in ("self", "kwargs", "__class__")}
        super().__init__(**kwargs)
        check_choice("position_embedding_type", position_embedding_type, POSITION_EMBEDDING_TYPES)
        check_choice("embedding_projection", embedding_projection, EMBEDDING_PROJECTIONS)
        # Every option is also an attribute of the same name, but the rate: ``self.dropout`` is the layer.
        for key, value in self._embedding_config.items():
            setattr(self, "dropout_rate" if key == "dropout" else key, value)
        if embedding_projection == "after_norm" and trigram_input:
            raise ConfigError(
                "trigram_input needs embedding_projection='before_norm' (the trigram feeds the projection)"
            )
        # Width of the position/type tables and of the norm.
        self._table_width = embedding_size if embedding_projection == "after_norm" else hidden_size
        self.embedding_transformation = None
        if trigram_input or embedding_size != hidden_size:
            self.embedding_transformation = TokenDense(
                hidden_size,
                kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
                name="embedding_transformation", dtype=self.dtype_policy
            )
        self.norm = make_norm(normalization_type, layer_norm_epsilon, name="norm", dtype=self.dtype_policy,
                              center=norm_use_bias)
        self.dropout = KeyedDropout(dropout, name="dropout", dtype=self.dtype_policy)

    def build(self, input_shape):
        def initializer(shape, dtype=None):
            # A fresh initializer per table: a shared unseeded one repeats its values.
            return keras.initializers.TruncatedNormal(stddev=self.initializer_range)(shape, dtype=dtype)

        self.word_embeddings = self.add_weight(
            "word_embeddings", shape=[self.vocab_size, self.embedding_size], initializer=initializer
        )
        self.position_embeddings = None
        if self.position_embedding_type == "absolute":
            self.position_embeddings = self.add_weight(
                "position_embeddings", shape=[self.max_position_embeddings, self._table_width], initializer=initializer
            )
        self.token_type_embeddings = None
        if self.type_vocab_size > 0:
            self.token_type_embeddings = self.add_weight(
                "token_type_embeddings", shape=[self.type_vocab_size, self._table_width], initializer=initializer
            )
        super().build(input_shape)

    def call(self, input_ids, token_type_ids=None, training=None):
        x = tf.gather(self.word_embeddings, input_ids)  # (B, S, E)
        x = tf.cast(x, self.compute_dtype)
        if self.trigram_input:
            # [x[t+1], x[t], x[t-1]] with zeros beyond the ends: a width-3 convolution as a concat.
            x = tf.concat(
                [
                    tf.pad(x[:, 1:], [[0, 0], [0, 1], [0, 0]]),
                    x,
                    tf.pad(x[:, :-1], [[0, 0], [1, 0], [0, 0]]),
                ],
                axis=-1,
            )  # (B, S, 3E)
        project_first = self.embedding_projection == "before_norm"
        if self.embedding_transformation is not None and project_first:
            x = self.embedding_transformation(x)  # (B, S, H)
        if self.position_embeddings is not None:
            seq = tf.shape(input_ids)[1]
            # Positions by index: Hugging Face RoBERTa numbers only the non-padding ids from pad_token_id + 1, so
            # right-padded inputs agree on every real token (left padding would shift them there, not here).
            start = self.position_offset
            x = x + tf.cast(self.position_embeddings[start:start + seq], x.dtype)  # (S, H) broadcasts over B
        if self.token_type_embeddings is not None and token_type_ids is not None:
            x = x + tf.cast(tf.gather(self.token_type_embeddings, token_type_ids), x.dtype)
        x = self.dropout(self.norm(x), training=training)
        if self.embedding_transformation is not None and not project_first:
            x = self.embedding_transformation(x)  # (B, S, H)
        return x

    def compute_output_shape(self, input_shape):
        # ids [B, S] -> [B, S, hidden]; tfmot's quantize wrappers ask for it.
        return tf.TensorShape(input_shape).concatenate([self.hidden_size])

    def get_config(self):
        return {**super().get_config(), **self._embedding_config}
