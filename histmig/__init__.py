"""histmig: migrate stored pydantic-ai message histories.

Legacy ``retry-prompt`` parts become the parts they always meant (a retried
``ToolReturnPart`` or a ``RetryFeedbackPart``) with a cause inferred from evidence, and the
stored shapes the newest framework cannot load are repaired. The Python API is
:mod:`histmig.api`: one function a command (``convert``, ``audit``, ``check``, ``otel``,
``otel_upgrade``, ``rules``, each taking a :class:`histmig.options.Options`, their default
``jobs`` the command line's), ``migrate`` (one history as plain JSON data, in place) and
``migrate_json`` (one record's JSON text in, the text to load and its report out).
"""

__version__ = "0.1.0"
