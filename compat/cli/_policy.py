"""The policy a run uses: the one recorded with the data, unless the operator says otherwise.

Every fold record carries ``MemoryPolicy.recorded()``. A command reads the latest record of
each thread, and uses that policy when the store holds one; when it holds several, each
thread keeps its own (commands that need a single policy refuse). A policy option that
contradicts the recorded policy is refused unless ``--policy-override``: the classic failure
was rebuilding 200-token summaries with the 2000-token default, silently.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import column, func, select, table

from adapters import MemoryPolicy
from adapters.errors import ConfigError
from compat.cli._common import show_url
from compat.cli._prompts import UNLOADABLE, follow_prompt

__all__ = ["FIELDS", "ModelArgs", "PolicyChoice", "Recorded", "choose_policy", "model_options", "policy_options",
           "resolve_policy", "scan_recorded"]

FIELDS = ("max_tokens", "keep_tokens", "max_messages", "keep_messages", "cut", "token_counter",
          "max_summary_tokens", "summary_format")
_FOLDS = table("memshift_folds", column("id"), column("thread_id"), column("record"))


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _key(policy: dict[str, Any]) -> str:
    return json.dumps(policy, sort_keys=True)


@dataclass
class Recorded:
    """The policies a store's threads were last folded with."""

    url: str
    policies: list[tuple[dict[str, Any], int]]  # most common first
    unrecorded: int = 0  # threads whose latest fold record predates recorded policies
    _engine: Any = field(default=None, repr=False)

    @property
    def where(self) -> str:
        return show_url(self.url)

    def latest(self, thread_id: str) -> dict[str, Any] | None:
        """The policy of the thread's newest fold record (one indexed query)."""
        from adapters.stores.schema import load_record

        query = (select(_FOLDS.c.record, _FOLDS.c.id).where(_FOLDS.c.thread_id == thread_id)
                 .order_by(_FOLDS.c.id.desc()).limit(1))
        with self._engine.connect() as conn:
            row = conn.execute(query).first()
        return load_record(row[0], thread_id, row[1]).get("policy") if row else None

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()


def scan_recorded(urls: Sequence[str | None], *, snapshot: bool = False) -> Recorded | None:
    """The recorded policies of the first store in ``urls`` that has fold records."""
    from adapters.errors import CorruptDataError
    from adapters.stores.readonly import read_engine, table_names
    from adapters.stores.schema import load_record
    from compat.cli._urls import kind_of

    for url in urls:
        if not url or kind_of(url) == "memory":
            continue
        if kind_of(url) == "sqlite":
            from compat.cli._urls import sqlite_path

            if not sqlite_path(url).exists():
                continue
        if "memshift_folds" not in table_names(url, snapshot=snapshot):
            continue
        engine = read_engine(url, snapshot=snapshot)
        last = select(func.max(_FOLDS.c.id).label("id")).group_by(_FOLDS.c.thread_id).subquery()
        query = select(_FOLDS.c.record, _FOLDS.c.thread_id, _FOLDS.c.id).join(
            last, _FOLDS.c.id == last.c.id)
        counts: Counter[str] = Counter()
        unrecorded = 0
        with engine.connect() as conn:
            if kind_of(url) == "postgresql":
                conn = conn.execution_options(stream_results=True, yield_per=2000)
            for raw, tid, row in conn.execute(query):
                try:
                    policy = load_record(raw, tid, row).get("policy")
                except CorruptDataError:  # that thread fails on its own; the scan goes on
                    unrecorded += 1
                    continue
                if policy:
                    counts[_key(policy)] += 1
                else:
                    unrecorded += 1
        if not counts:
            engine.dispose()
            continue
        return Recorded(url, [(json.loads(k), n) for k, n in counts.most_common()], unrecorded,
                        engine)
    return None


def _counter_of(data: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """Recorded data with a counter this process can load (a function's name is not one)."""
    data = dict(data)
    name = data.get("token_counter")
    if name in (None, "approximate", "count_tokens_cjk"):
        data["token_counter"] = None
    elif isinstance(name, str) and name.startswith("tiktoken_"):
        data["token_counter"] = name.removeprefix("tiktoken_")
    elif isinstance(name, str) and not name.endswith("_base"):
        notes.append(f"{UNLOADABLE}: the recorded token counter {name!r} is a function this "
                     "command cannot load; using the approximate counter (pass --token-counter)")
        data["token_counter"] = None
    return data


def _same(name: str, recorded: Any, given: Any) -> bool:
    if name == "token_counter":
        norm = {None: None, "approximate": None, "count_tokens_cjk": None}
        return norm.get(recorded, recorded) == norm.get(given, given)
    return bool(recorded == given)


def _from_options(given: dict[str, Any], default: MemoryPolicy) -> MemoryPolicy:
    """The options over the command's default, as the CLI always read them."""
    max_tokens = given.get("max_tokens") or (None if given.get("max_messages") else
                                              default.max_tokens)
    return MemoryPolicy(
        max_tokens=max_tokens, keep_tokens=given.get("keep_tokens"),
        max_messages=given.get("max_messages"), keep_messages=given.get("keep_messages"),
        cut=given.get("cut") or "turn", token_counter=given.get("token_counter"),
        max_summary_tokens=given.get("max_summary_tokens"),
        summary_format=given.get("summary_format") or default.summary_format)


def _one_line(policy: MemoryPolicy) -> str:
    return policy.explain().splitlines()[0]


def _extras(policy: MemoryPolicy) -> str:
    cap = f"{policy.max_summary_tokens} tokens" if policy.max_summary_tokens else "default"
    counter = policy.recorded()["token_counter"] or "approximate"
    return (f"{policy.summary_format} summaries, summary cap {cap}, {counter} token counter, "
            f"prompt {policy.prompt_version}")


@dataclass
class PolicyChoice:
    """The run's policy, where it came from, and (mixed stores) each thread's own."""

    policy: MemoryPolicy
    origin: str  # recorded | options | recorded+options | override | default | mixed
    recorded: Recorded | None = None
    given: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    _cache: dict[str, MemoryPolicy] = field(default_factory=dict, repr=False)

    def for_thread(self, thread_id: str) -> MemoryPolicy | None:
        """The policy a thread follows; ``None`` when nothing says (default origin)."""
        if self.origin == "default":
            return None
        if self.origin != "mixed" or self.recorded is None:
            return self.policy
        data = self.recorded.latest(thread_id)
        if not data:
            return self.policy
        key = _key(data)
        if key not in self._cache:
            self._cache[key] = MemoryPolicy.from_recorded(_counter_of(data, []))
        return self._cache[key]

    def describe(self) -> list[str]:
        """Human lines for the start of a run."""
        where = self.recorded.where if self.recorded else ""
        if self.origin == "mixed" and self.recorded is not None:
            lines = [f"policy: {where} holds {len(self.recorded.policies)} different policies; "
                     "each thread keeps its own:"]
            for data, n in self.recorded.policies:
                policy = MemoryPolicy.from_recorded(_counter_of(data, []))
                lines.append(f"  {n:>7} thread(s): {_one_line(policy)}; {_extras(policy)}")
        else:
            source = {
                "recorded": f"recorded in {where}",
                "recorded+options": f"recorded in {where}, options agree",
                "override": f"from the options, REPLACING the policy recorded in {where} "
                            "(--policy-override)",
                "options": "from the options (nothing recorded in the store)",
                "default": "the default",
            }[self.origin]
            lines = [f"policy ({source}):"]
            lines += ["  " + line for line in self.policy.explain().splitlines()]
            lines.append("  " + _extras(self.policy))
        return lines + [f"  note: {n}" for n in self.notes]

    @property
    def substitutions(self) -> list[str]:
        """The notes saying this run does not follow what the store recorded."""
        return [n for n in self.notes if n.startswith(UNLOADABLE)]

    def as_json(self) -> dict[str, Any]:
        rec = self.recorded
        return {
            "origin": self.origin, "effective": self.policy.recorded(),
            "explain": self.policy.explain(), "given": self.given,
            "recorded_in": rec.where if rec else None,
            "recorded": [{"policy": p, "threads": n} for p, n in rec.policies] if rec else [],
            "unrecorded_threads": rec.unrecorded if rec else 0, "notes": self.notes,
        }

    def close(self) -> None:
        if self.recorded is not None:
            self.recorded.close()


def resolve_policy(given: dict[str, Any], recorded: Recorded | None, default: MemoryPolicy, *,
                   override: bool, allow_mixed: bool, default_note: str = "",
                   strict: bool = False, prompt: Any = None) -> PolicyChoice:
    """Recorded policy unless options say otherwise; contradictions need ``--policy-override``.
    ``strict`` (a proof): what the record names and this process cannot load is refused, with
    how to supply it, instead of substituted; ``prompt``: ``--summary-prompt``'s text."""
    given = {k: v for k, v in given.items() if v is not None}
    notes: list[str] = []
    if recorded is None:
        if given:
            policy = follow_prompt(_from_options(given, default), None, prompt, strict, "",
                                    notes)
            return PolicyChoice(policy, "options", None, given, notes)
        policy = follow_prompt(default, None, prompt, strict, "", notes)
        return PolicyChoice(policy, "default", None, {},
                            notes + ([default_note] if default_note else []))
    where = recorded.where
    for data, n in recorded.policies:
        for name, value in given.items():
            if not _same(name, data.get(name), value) and not override:
                recorded.close()
                raise ConfigError(
                    f"{_option(name)} {value} contradicts the policy recorded in {where} "
                    f"({name}={data.get(name)} on {n} thread(s)); drop the option to use the "
                    "recorded policy, or add --policy-override to replace it")
    contradicted = any(not _same(k, d.get(k), v) for d, _ in recorded.policies
                       for k, v in given.items())
    base = _counter_of(recorded.policies[0][0], notes)
    if strict and notes and "token_counter" not in given:
        recorded.close()
        raise ConfigError(f"the policy recorded in {where} counts tokens with "
                          f"{recorded.policies[0][0].get('token_counter')!r}, a function this "
                          "command cannot load: replay with another counter by passing "
                          "--token-counter NAME (approximate, cl100k_base, o200k_base) with "
                          "--policy-override; the report will say it substituted it")
    if len(recorded.policies) > 1 and not contradicted:
        if not allow_mixed:
            recorded.close()
            raise ConfigError(
                f"{where} holds {len(recorded.policies)} different policies and this command "
                "needs one: pass the policy options (e.g. --max-tokens N --keep-tokens M) "
                "with --policy-override")
        return PolicyChoice(MemoryPolicy.from_recorded(base), "mixed", recorded, given, notes)
    if contradicted:
        policy = _from_options(given, default) if len(recorded.policies) > 1 else \
            MemoryPolicy.from_recorded(base, **given)
        origin = "override"
    else:
        policy = MemoryPolicy.from_recorded(base, **given)
        origin = "recorded+options" if given else "recorded"
    version = recorded.policies[0][0].get("prompt_version")
    if origin != "override" or prompt is not None:
        try:
            policy = follow_prompt(policy, version, prompt, strict, where, notes)
        except ConfigError:
            recorded.close()
            raise
    return PolicyChoice(policy, origin, recorded, given, notes)


# -- the options every policy-driven command takes ------------------------------------------
def policy_options(default_text: str, *, summary_format: bool = False) -> Any:
    """``--max-tokens`` … ``--policy-override``; defaults come from the store's records."""
    import click

    recorded = "[default: the policy recorded in the store, else "

    def decorate(func: Any) -> Any:
        options = [
            click.option("--policy-override", is_flag=True,
                         help="Let policy options replace a different policy recorded in the "
                              "store (refused otherwise, exit 2)."),
            click.option("--max-summary-tokens", type=click.IntRange(min=1), metavar="N",
                         help="Cap on summary length, asked of the model and enforced on the "
                              f"reply. {recorded}memshift's cap]"),
            click.option("--token-counter", metavar="NAME",
                         help=f"approximate, cl100k_base or o200k_base. {recorded}approximate]"),
            click.option("--cut", type=click.Choice(["turn", "message"]),
                         help="Fold at turn boundaries, or at any message (stock classic). "
                              f"{recorded}turn]"),
            click.option("--keep-messages", type=click.IntRange(min=1), metavar="N",
                         help=f"Messages kept verbatim after a fold. {recorded}--max-messages]"),
            click.option("--max-messages", type=click.IntRange(min=1), metavar="N",
                         help=f"Fold when the window exceeds N messages. {recorded}off]"),
            click.option("--keep-tokens", type=click.IntRange(min=1), metavar="N",
                         help=f"Tokens kept verbatim after a fold. {recorded}--max-tokens]"),
            click.option("--max-tokens", type=click.IntRange(min=1), metavar="N",
                         help=f"Fold when the verbatim window exceeds N tokens. "
                              f"{recorded}{default_text}]"),
        ]
        if summary_format:
            options.insert(0, click.option(
                "--summary-format", type=click.Choice(["text", "structured"]),
                help=f"Free-text or structured summaries. {recorded}text]"))
        for option in options:
            func = option(func)
        return func
    return decorate


class ModelArgs:
    """``--model`` / ``--base-url`` as the summarizer factories read them."""

    def __init__(self, opts: dict[str, Any]) -> None:
        self.model, self.base_url = opts.get("model"), opts.get("base_url")


def model_options(func: Any) -> Any:
    """``--model`` and ``--base-url``: the summarizer (offline deterministic by default)."""
    import click

    func = click.option("--base-url", metavar="URL",
                        help="OpenAI-compatible server for --model openai:... "
                             "[default: $OPENAI_BASE_URL]")(func)
    return click.option("--model", metavar="SPEC",
                        help="Summarizer model, e.g. openai:gpt-4.1-mini or any init_chat_model "
                             "string. [default: memshift's offline summarizer]")(func)


def model_from(opts: dict[str, Any]) -> Any:
    """The chat model ``--model``/``--base-url`` name (``None``: memshift's offline one)."""
    if not opts.get("model"):
        return None
    from compat.models import resolve_model

    return resolve_model(opts["model"], base_url=opts.get("base_url"))


def choose_policy(opts: dict[str, Any], urls: Sequence[str | None], default: MemoryPolicy,
                  out: Any, *, allow_mixed: bool, snapshot: bool = False,
                  default_note: str = "", strict: bool = False,
                  prompt: Any = None) -> PolicyChoice:
    """Scan ``urls`` for recorded policies, resolve against the options, print the result."""
    given = {name: opts.get(name) for name in FIELDS}
    recorded = scan_recorded(urls, snapshot=snapshot)
    choice = resolve_policy(given, recorded, default, override=bool(opts.get("policy_override")),
                            allow_mixed=allow_mixed, default_note=default_note, strict=strict,
                            prompt=prompt)
    for line in choice.describe():
        out.header(line)
    return choice


def summarizer_from(args: Any, policy: MemoryPolicy) -> Any:
    """The summarizer ``--model`` asks for (``None``: memshift's offline one). ``args`` has
    ``model`` and ``base_url`` attributes."""
    if not getattr(args, "model", None):
        return None
    from adapters.summarizer import build_summarizer
    from compat.models import resolve_model

    return build_summarizer(policy, resolve_model(args.model, base_url=args.base_url))
