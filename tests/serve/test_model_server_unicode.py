"""Red-team round 5: text that is not Unicode in a model-server request is the client's error (400),
not the server's (500 with a logged traceback, from the tokenizer)."""

from __future__ import annotations

import pytest

from tests.serve import post_json
from tests.serve.model_servers import built, running

LONE = [
    (
        "/chat/completions",
        b'{"messages": [{"role": "user", "content": "\\ud800"}], "max_tokens": 2}',
    ),
    (
        "/chat/completions",
        b'{"messages": [{"role": "user", "content": [{"type": "text", "text": "a\\udfffb"}]}], '
        b'"max_tokens": 2}',
    ),
    ("/completions", b'{"prompt": ["a", "\\uDC00"], "max_tokens": 2}'),
]


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    with running(built(tiny_model_dir, "--model-name", "tiny")) as httpd:
        yield httpd


@pytest.mark.parametrize("path, body", LONE)
def test_a_lone_surrogate_is_a_400(server, path, body):
    code, answer = post_json(server.base_url + path, body)
    assert code == 400 and "lone surrogate" in answer["error"]["message"], answer


def test_a_surrogate_pair_and_an_escaped_backslash_are_text(server):
    body = (
        b'{"messages": [{"role": "user", "content": "\\ud83d\\ude00 \\\\ud800"}], "max_tokens": 2}'
    )
    code, answer = post_json(server.base_url + "/chat/completions", body)
    assert code == 200, answer
