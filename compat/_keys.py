"""Input/output key rules of the classic drop-in API, in one place.

Same rules and messages as stock ``BaseChatMemory._get_input_output``; the thread key
is removed first so it is never mistaken for the prompt's input.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_classic.memory.utils import get_prompt_input_key

from adapters.errors import InputKeyError

__all__ = ["resolve_input", "resolve_output"]


def resolve_input(
    inputs: Mapping[str, Any], *, input_key: str | None, memory_variables: Sequence[str],
    thread_key: str,
) -> Any:
    if input_key is None:
        visible = {k: v for k, v in inputs.items() if k != thread_key}
        try:
            input_key = get_prompt_input_key(visible, list(memory_variables))
        except ValueError as exc:
            raise InputKeyError(f"{exc}; set input_key= to choose one") from exc
    if input_key not in inputs:
        raise InputKeyError(f"input key {input_key!r} not found in inputs {sorted(inputs)}")
    return inputs[input_key]


def resolve_output(outputs: Mapping[str, Any], *, output_key: str | None, owner: str) -> Any:
    if output_key is None:
        if len(outputs) == 1:
            output_key = next(iter(outputs))
        elif "output" in outputs:
            output_key = "output"
            warnings.warn(
                f"'{owner}' got multiple output keys: {outputs.keys()}. The default 'output' "
                "key is being used. If this is not desired, please manually set 'output_key'.",
                stacklevel=4,
            )
        else:
            raise InputKeyError(
                f"Got multiple output keys: {outputs.keys()}, cannot determine which to store "
                "in memory. Please set the 'output_key' explicitly."
            )
    if output_key not in outputs:
        raise InputKeyError(f"output key {output_key!r} not found in outputs {sorted(outputs)}")
    return outputs[output_key]
