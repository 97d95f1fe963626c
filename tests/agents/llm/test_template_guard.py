"""Chat templates render in worker processes under a time, memory and size bound (issue 43)."""

from __future__ import annotations

import time

import pytest

from tests.agents.llm.template_stub import JinjaTokenizer
from verigym.agents.llm.template_guard import TemplateError, TemplateRenderer

PLAIN = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
LOOPS = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}x"
CONSTANT = "{% set x = 'a' * 400000000 %}{{ x[:1] }}"


def _render(template: str, renderer: TemplateRenderer | None = None, **bounds) -> str:
    own = renderer is None
    renderer = renderer or TemplateRenderer(JinjaTokenizer(template), workers=1, **bounds)
    try:
        return renderer.render([{"role": "user", "content": "hi"}])
    finally:
        if own:
            renderer.close()


def test_a_plain_template_renders_as_in_process():
    assert _render(PLAIN) == "<user>hi"


def test_a_template_that_loops_for_ever_is_refused_within_the_timeout_and_the_worker_replaced():
    tokenizer = JinjaTokenizer(LOOPS)
    renderer = TemplateRenderer(tokenizer, workers=1, timeout=1.0)
    try:
        started = time.monotonic()
        with pytest.raises(TemplateError, match="took over 1 s"):
            _render(LOOPS, renderer)  # the worker is killed
        assert time.monotonic() - started < 30  # start-up of the worker + 1 s, not hours
        tokenizer.chat_template = PLAIN  # not the workers' copy: a new worker gets the new one
        renderer._blob = __import__("pickle").dumps(tokenizer)
        assert _render(PLAIN, renderer) == "<user>hi"  # the renderer works on
    finally:
        renderer.close()


def test_a_template_building_a_huge_constant_is_refused_by_the_memory_bound():
    with pytest.raises(TemplateError, match="needed over 64 MiB"):
        _render(CONSTANT, memory_bytes=64 << 20, timeout=20.0)


def test_a_rendered_prompt_over_the_size_bound_is_refused():
    with pytest.raises(TemplateError, match="over 100 characters"):
        _render("{{ 'a' * 1000 }}", max_chars=100)


def test_a_template_error_is_one_line():
    with pytest.raises(TemplateError) as caught:
        _render("{{ messages.__class__.__mro__ }}{{ undefined_fn() }}")
    assert "\n" not in str(caught.value)


@pytest.mark.slow  # a worker with transformers imported starts in ~5 s; 5 hostile requests
def test_the_model_server_answers_on_after_hostile_templates(tmp_path, tiny_model_dir, monkeypatch):
    import argparse
    import json
    import shutil
    import threading
    import urllib.error
    import urllib.request

    import verigym.agents.llm.template_guard as guard
    from verigym.commands import serve_model as serve

    monkeypatch.setattr(guard, "TEMPLATE_TIMEOUT_S", 2.0)
    folder = tmp_path / "hostile"
    shutil.copytree(tiny_model_dir, folder)
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = LOOPS
    config_path.write_text(json.dumps(config))
    for name in ("chat_template.jinja", "chat_template.json"):
        if (folder / name).exists():
            (folder / name).write_text(
                LOOPS if name.endswith("jinja") else json.dumps({"chat_template": LOOPS})
            )
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    httpd = serve.build(parser.parse_args([str(folder), "--port", "0", "--device", "cpu"]))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()

    def post(path: str, body: dict) -> int:
        request = urllib.request.Request(
            httpd.base_url + path, data=json.dumps(body).encode(), method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    try:
        chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        statuses = [post("/chat/completions", chat) for _ in range(5)]  # 4 took every prep thread
        assert statuses == [400] * 5
        assert post("/completions", {"prompt": "hi", "max_tokens": 2}) == 200
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)
