"""histmig: migrate stored pydantic-ai message histories.

Legacy ``retry-prompt`` parts become the parts they always meant (a retried
``ToolReturnPart`` or a ``RetryFeedbackPart``) with a cause inferred from evidence, and the
stored shapes the newest framework cannot load are repaired. The Python API:

- :func:`histmig.pipeline.migrate`: rewrite one history (plain JSON data) in place;
- :func:`histmig.pipeline.process`: one record's bytes in, an :class:`~histmig.pipeline.Outcome` out;
- :func:`histmig.runner.run`: a whole file, as ``histmig convert/audit/check`` do.
"""

__version__ = "0.1.0"
