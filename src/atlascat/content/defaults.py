"""A chat prompt's defaults, apart from the item code so that a command line reads them without
loading it: the prompt styles, the default style and the sampling temperature."""
from __future__ import annotations

__all__ = ["PROMPT_STYLES", "PROMPT_STYLE", "TEMPERATURE"]

#: how a chat prompt asks an item: lettered options alone, or after the leaderboard's few shots
PROMPT_STYLES = ("zero-shot", "few-shot")
PROMPT_STYLE = PROMPT_STYLES[0]
#: the sampling temperature of a chat request (0: the most likely answer)
TEMPERATURE = 0.0
