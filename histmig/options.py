"""Options: everything a command takes besides its input and its output, in one object.

The command line builds one from its flags (declared once, :mod:`histmig.cli`); a program
builds one by hand (``Options(select=("HM1",), jobs=2)``) and passes it to the functions of
:mod:`histmig.api`. :meth:`Options.plan` turns it into the engine's
:class:`~histmig.engine.Plan`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from histmig.engine import Plan
from histmig.errors import BadFieldPath, UnknownRule, UsageError
from histmig.records import field_path
from histmig.rules import opt_ins, select
from histmig.rules.base import Budgets, CauseMode, Rule
from histmig.rules.counting import counting_rules
from histmig.schema.releases import NEWEST, Release, release

CAUSE_MODES: tuple[CauseMode, ...] = ("inferred", "framework")


def default_jobs() -> int:
    """The default number of worker processes: the number of cores (1 when it cannot be told)."""
    return os.cpu_count() or 1


def codes(values: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Rule codes or prefixes, given one by one or comma-separated, without blanks."""
    return tuple(code.strip() for value in values for code in value.split(",") if code.strip())


@dataclass(frozen=True)
class Options:
    """What a command does besides where it reads and writes (README "Commands").

    - ``select``, ``ignore``: rule codes or prefixes (``HM2``), one by one or comma-separated;
      ``select`` empty means every rule.
    - ``unsafe_fixes``: apply the fixes of unsafe rules too (``convert``, ``audit``).
    - ``causes``: ``inferred`` (from evidence) or ``framework`` (pydantic-ai 2.68's loader).
    - ``messages_field``: the envelope field holding the messages (``None``: auto-detect), a
      path of keys for a nested one (``payload.messages``; ``\\.`` is a dot inside a key,
      :func:`~histmig.records.field_path`).
    - ``format``: the input's format when its name does not tell (a name of
      :func:`histmig.sources.formats`).
    - ``messages_column``, ``id_column``, ``table``: a columnar input's messages column, the
      column naming each record in the report, and a database's table.
    - ``jobs``: worker processes (``None``: the number of cores; 1: this process).
    - ``schema``, ``key_column``, ``single_transaction``: a PostgreSQL table's schema (``None``:
      the search path), the column whose order pages a table and names each row (``None``: the
      primary key; SQLite: else the rowid), and an in-place run as one transaction for the
      whole table instead of one a page (PostgreSQL; SQLite's always is one).
    - ``target``: the pydantic-ai release (``"2.59.0"``) whose shapes the histories are
      written in (``convert``/``audit`` ``--target``) or that must load them (``check
      --reader``); ``None``: the newest (2.68.0), today's migration. An older release runs
      the rollback rules (HM5xx) and validates against what it loads
      (:mod:`histmig.schema.releases`).

    - ``attempts``: run HM104, which fills ``retry.attempt`` (``convert``, ``audit``);
      ``counting``: the counting rules it replays (``current``, ``writer`` or a release such
      as ``"1.0.18"``); ``max_retries``: the agent's budgets, ``"tools=N,output=M,tool:NAME=K"``,
      which fill ``retry.max_retries`` (README "Attempts").

    Raises :class:`~histmig.errors.UsageError` for an unknown cause mode, a
    ``messages_field`` that names no key, a ``jobs`` below 1, a ``target`` that is no
    release histmig knows (0.0.13 to 2.68.0), a ``counting`` or ``max_retries`` that does not
    parse, or either without ``attempts``."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    unsafe_fixes: bool = False
    causes: CauseMode = "inferred"
    messages_field: str | None = None
    format: str | None = None
    messages_column: str | None = None
    id_column: str | None = None
    table: str | None = None
    jobs: int | None = None
    schema: str | None = None
    key_column: str | None = None
    single_transaction: bool = False
    target: str | None = None
    attempts: bool = False
    counting: str = "current"
    max_retries: str | None = None

    def __post_init__(self) -> None:
        if self.causes not in CAUSE_MODES:
            raise UsageError(f"unknown cause mode {self.causes!r} (one of: {', '.join(CAUSE_MODES)})")
        if self.jobs is not None and self.jobs < 1:
            raise UsageError(f"jobs must be 1 or more, not {self.jobs}")
        if self.messages_field is not None:
            try:
                field_path(self.messages_field)
            except BadFieldPath as exc:
                raise UsageError(str(exc)) from exc
        self.release  # noqa: B018 (a target that is no release is a usage error at once)
        if not self.attempts and (self.counting != "current" or self.max_retries is not None):
            raise UsageError("--counting and --max-retries need --attempts")
        try:
            counting_rules(self.counting)
            self.budgets  # noqa: B018 (a budget that does not parse is a usage error before anything is read)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc

    @property
    def budgets(self) -> Budgets:
        """The budgets of ``max_retries`` (none given: :class:`~histmig.rules.base.Budgets`
        all ``None``). Raises ``ValueError`` when it does not parse."""
        return Budgets() if self.max_retries is None else Budgets.parse(self.max_retries)

    @property
    def release(self) -> Release:
        """``target`` as a :class:`~histmig.schema.releases.Release` (the newest when not
        given). Raises :class:`~histmig.errors.UsageError` for one histmig does not know."""
        if self.target is None:
            return NEWEST
        try:
            return release(self.target)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The selected rules that run for the target, in their order; an opt-in rule only when
        the field it names is given (``attempts``). Raises
        :class:`~histmig.errors.UsageError` for a code or prefix no rule has, none of
        whose rules runs for the target, or the code of an opt-in rule whose field is not
        given."""
        enabled = [name for name in opt_ins() if getattr(self, name)]
        try:
            return select(codes(self.select), codes(self.ignore), self.release, enabled)
        except UnknownRule as exc:
            raise UsageError(str(exc)) from exc

    def plan(self, *, validate_all: bool = False, readers: bool = False) -> Plan:
        """The engine's :class:`~histmig.engine.Plan` for these options; ``validate_all``
        parses and validates every record (``check``), ``readers`` tells which releases load
        each (``check --reader``)."""
        return Plan(
            self.rules,
            self.unsafe_fixes,
            self.causes,
            self.messages_field,
            validate_all,
            self.release,
            readers,
            self.counting,
            self.budgets,
        )

    @property
    def workers(self) -> int:
        """``jobs``, or the number of cores."""
        return self.jobs if self.jobs is not None else default_jobs()
