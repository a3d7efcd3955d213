"""The contract suites, as pytest classes users subclass (like ``langchain-tests``).

``SummaryMemoryContract``: one configured memory, every behaviour memshift promises.
``BackendEquivalenceContract``: randomized conversations through classic and middleware,
compared after every turn. ``StagedMigrationContract``: the same while threads move between
the backends at random turns. Subclass, supply the fixture(s), run pytest.

Every suite takes your summarizer through one fixture, ``summarizer``: a LangChain chat model
or LLM (``ChatOpenAI(...)``: prompted with the policy's prompt), a ``Summarizer`` object, a
plain ``fn(summary, messages) -> str``, or ``None`` (memshift's offline summarizer). The
suites adapt and record it themselves; anything else is a ``ConfigError`` naming these kinds.
"""

from compat.testing.conversations import RecordingSummarizer, agent_turn, filler_turn
from compat.testing.contract import SummaryMemoryContract
from compat.testing.fakes import EchoChatModel
from compat.testing.equivalence import BackendEquivalenceContract
from compat.testing.staged import StagedMigrationContract
from compat.testing.store import StoreContract
from compat.testing.summarizers import summarizer_settings

__all__ = [
    "BackendEquivalenceContract",
    "EchoChatModel",
    "RecordingSummarizer",
    "StagedMigrationContract",
    "StoreContract",
    "SummaryMemoryContract",
    "agent_turn",
    "filler_turn",
    "summarizer_settings",
]
