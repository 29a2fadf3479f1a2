"""Moved to :mod:`mobilebert_kit.sources.model_source` (issue 13 item 3); this name stays for code written against it.

New code imports ``mobilebert_kit.sources.model_source``; nothing in the package imports this module.
"""

from mobilebert_kit.sources.model_source import PRESET_SEED, ModelSource  # noqa: F401  (re-exported)
