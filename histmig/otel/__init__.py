"""OpenTelemetry: the GenAI export of stored histories and the v5 -> v6 upgrade of exported
arrays (:mod:`histmig.otel.export`, docs/framework.md §5), and the jobs ``histmig otel`` and
``histmig otel-upgrade`` run them in (:mod:`histmig.otel.jobs`)."""

from histmig.errors import OtelExportError
from histmig.otel.export import SUPPORTED_VERSIONS, to_otel_messages, upgrade_v5_to_v6

__all__ = ["SUPPORTED_VERSIONS", "OtelExportError", "to_otel_messages", "upgrade_v5_to_v6"]
