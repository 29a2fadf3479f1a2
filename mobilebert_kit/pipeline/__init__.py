"""``mbk pipeline``: a recipe end to end with stage caching (see docs/pipeline.md).

- :mod:`~mobilebert_kit.pipeline.runner`: :class:`Pipeline`, the stages.
- :mod:`~mobilebert_kit.pipeline.manifest`: :class:`StageManifest`, content hashes and skip decisions.
- :mod:`~mobilebert_kit.pipeline.report`: the JSON document and the HTML page.
- :mod:`~mobilebert_kit.pipeline.source`: the default recipe and model, ``--source`` overrides.
"""

from mobilebert_kit.pipeline.manifest import StageManifest
from mobilebert_kit.pipeline.runner import Pipeline

__all__ = ["Pipeline", "StageManifest"]
