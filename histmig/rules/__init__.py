"""The rewrite rules, registered in the order the pipeline runs them.

HM2xx repairs run first (HM201 gives every call an id the retry rules pair with), then
HM3xx, then the retry-prompt migration: HM103 before HM101/HM102 so that a re-bindable
unknown-tool retry is not turned into feedback first (design.md "Rules").
"""

from histmig.rules import load_failures, misreads, retry_prompt
from histmig.rules.base import REGISTRY, Change, Context, Rule

__all__ = ["REGISTRY", "Change", "Context", "Rule", "load_failures", "misreads", "retry_prompt", "rule_codes"]


def rule_codes() -> list[str]:
    """Every registered rule code, sorted (``HM101`` … ``HM302``)."""
    return sorted(rule.code for rule in REGISTRY)
