"""TensorBoard scalars without the ``tensorboard`` package.

TensorFlow 2.21 does not depend on ``tensorboard``, and ``tf.summary.scalar``
fails without it. The scalar plugin only needs a float32 tensor tagged with
plugin name ``"scalars"`` and data class SCALAR, which TensorFlow's own
``tf.summary.write`` records; TensorBoard reads the events files as usual.
"""

from mobilebert_kit.backend import tf


def write_scalars(writer, values, step):
    """Writes ``{tag: float}`` as TensorBoard scalars at ``step`` with ``writer`` (``tf.summary.create_file_writer``)."""
    from tensorflow.core.framework import summary_pb2

    metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
                                           data_class=summary_pb2.DATA_CLASS_SCALAR)
    with writer.as_default():
        for tag, value in values.items():
            tf.summary.write(tag, tf.constant(float(value), tf.float32), step=int(step), metadata=metadata)


def read_scalars(directory):
    """Returns ``{tag: [(step, value), ...]}`` from the events files under ``directory`` (tests, reports)."""
    from pathlib import Path

    out = {}
    for path in sorted(Path(directory).rglob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                number = float(tf.make_ndarray(value.tensor)) if value.HasField("tensor") else value.simple_value
                out.setdefault(value.tag, []).append((int(event.step), number))
    return out
