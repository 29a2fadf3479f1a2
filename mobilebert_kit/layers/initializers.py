"""Initializer helper."""

from mobilebert_kit.backend import keras


def fresh_initializer(initializer):
    """Returns a new instance of ``initializer``.

    tf_keras initializers without a seed return identical values when one
    instance initializes several variables, so every kernel needs its own.
    """
    return keras.initializers.deserialize(keras.initializers.serialize(keras.initializers.get(initializer)))
