"""A picklable stand-in for a tokenizer whose ``apply_chat_template`` runs a Jinja template in
jinja2's sandbox, as transformers does (imports nothing heavy, so a render worker starts fast)."""

from __future__ import annotations

from typing import Any


class JinjaTokenizer:
    """``apply_chat_template`` over ``chat_template`` (compiled per call, as a first call would)."""

    def __init__(self, chat_template: str) -> None:
        self.chat_template = chat_template

    def apply_chat_template(
        self,
        messages: list[dict[str, Any]],
        *,
        tokenize: bool = False,
        add_generation_prompt: bool = True,
        tools: Any = None,
    ) -> str:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        template = ImmutableSandboxedEnvironment().from_string(self.chat_template)
        return template.render(
            messages=messages, tools=tools, add_generation_prompt=add_generation_prompt
        )
