"""``mbk pipeline``: a recipe end to end with stage caching (see docs/pipeline.md; docs/architecture.md maps its
modules)."""

from mobilebert_kit.pipeline.manifest import StageManifest
from mobilebert_kit.pipeline.runner import Pipeline

__all__ = ["Pipeline", "StageManifest"]
