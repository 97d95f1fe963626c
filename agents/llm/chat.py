"""Chat formatting shared by the LLM policy, the GRPO trainer and the server.

A :class:`ChatFormat` turns chat messages into model input, through the tokenizer's own chat
template when it has one and a plain ``System:/User:/Assistant:`` layout otherwise. For multi-turn
training it also gives the *continuation* text that follows an assistant reply (end of the reply,
the next user message, the next assistant header), so an episode is one token sequence built by
concatenation: the tokens the model saw while acting are exactly the tokens it is trained on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["ChatFormat", "Message", "feedback_text", "initial_messages"]

Message = Mapping[str, str]
"""A chat message: ``{"role": "system" | "user" | "assistant", "content": str}``."""

_SENTINEL = "\u2402verigym-reply\u2402"


def feedback_text(observation: Any, info: Mapping[str, Any] | None) -> str:
    """The next user message: the observation, plus the env's ``action_error`` when the observation
    does not already say it (a GUI page or a grid looks the same after an invalid action), so the
    model learns what was wrong. :class:`~verigym.agents.llm.agent.ChatHistory` writes the same."""
    text = str(observation)
    error = (info or {}).get("action_error")
    if error and str(error) not in text:
        text = f"{text}\n(Your last action was invalid: {error})"
    return text


def initial_messages(instructions: str, observation: str) -> list[dict[str, str]]:
    """The opening messages of an episode: the rules as a system message, the observation as user.

    The system message is there whenever the env gave instructions, also when the first
    observation repeats them: a chat template fills a missing system message with the model's own
    default ("You are a helpful AI assistant named SmolLM..."), which pulls a small model away from
    the env's answer format.
    """
    messages: list[dict[str, str]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    messages.append({"role": "user", "content": observation})
    return messages


class ChatFormat:
    """Chat messages -> prompt text for one tokenizer.

    Args:
        tokenizer: a Hugging Face tokenizer. Its ``chat_template`` is used when set.
        use_template: ``False`` forces the plain layout even when the tokenizer has a template.

    The plain layout (no template) is::

        System: <instructions>

        User: <observation>

        Assistant: <reply>

    and replies stop at the string ``"\\nUser:"`` (see :attr:`stop_strings`).
    """

    def __init__(self, tokenizer: Any, *, use_template: bool | None = None):
        self.tokenizer = tokenizer
        has_template = bool(getattr(tokenizer, "chat_template", None))
        self.use_template = (
            has_template if use_template is None else bool(use_template and has_template)
        )

    @property
    def stop_strings(self) -> tuple[str, ...]:
        """Strings that end a reply besides the EOS token (the plain layout's next-turn header)."""
        return () if self.use_template else ("\nUser:",)

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str:
        """The prompt text of ``messages`` (ending with the assistant header when asked)."""
        if self.use_template:
            return self.tokenizer.apply_chat_template(
                [dict(m) for m in messages],
                tokenize=False,
                add_generation_prompt=add_generation_prompt,
            )
        parts = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
        text = "\n\n".join(parts)
        if add_generation_prompt:
            text += "\n\nAssistant: " if parts else "Assistant: "
        return text

    def continuation(self, observation: str, *, reply_ended: bool) -> str:
        """The text that follows an assistant reply when the env answers with ``observation``.

        Args:
            observation: the next user message.
            reply_ended: the reply's tokens already end with the end-of-turn token (EOS), so the
                template's own end-of-turn text is not repeated.
        """
        if not self.use_template:
            return f"\n\nUser: {observation}\n\nAssistant: "
        messages = [
            {"role": "user", "content": "."},
            {"role": "assistant", "content": _SENTINEL},
            {"role": "user", "content": observation},
        ]
        text = self.render(messages, add_generation_prompt=True)
        tail = text[text.index(_SENTINEL) + len(_SENTINEL) :]
        eos = getattr(self.tokenizer, "eos_token", None)
        if reply_ended and eos and tail.startswith(eos):
            tail = tail[len(eos) :]
        return tail

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` with no special tokens added (templates spell them out)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
