"""Agent specs carry a display name (``name=``, issue 42 §2): allow-listed and bounded like every
spec field, shown in the standings in place of the spec, with the spec and config hash kept on the
row's page and in the standings' agents section; a stored spec whose name is not allowed shows as
itself, escaped."""

from __future__ import annotations

import re

import pytest

from tests.leaderboards.rows import TWO_TASKS, scored_row
from verigym.leaderboards.agent_spec import (
    MAX_NAME_LENGTH,
    display_name,
    parse_agent_spec,
    split_display_name,
)
from verigym.leaderboards.standings import (
    agent_label,
    compute_standings,
    render_html,
    render_markdown,
)
from verigym.leaderboards.store import ResultsStore

LLM = "openai:http://127.0.0.1:8765/v1#smollm2?max_tokens=48&temperature=0&families=text,tool,gui&name=SmolLM2-135M-Instruct"
NAMED_RANDOM = "random?name=Random + luck (baseline)"
BAD = "random?name=<img src=x onerror=alert(1)>"
INJECTED = "random` **forged** `x | y?name=Looks fine"
"""The store refuses control characters in a spec; a backtick or a pipe it keeps."""


def test_the_name_is_split_off_and_never_reaches_the_agent():
    spec = parse_agent_spec(LLM)
    assert spec.display_name == "SmolLM2-135M-Instruct" and spec.text == LLM
    assert dict(spec.options) == {"max_tokens": 48, "temperature": 0}
    assert spec.families == ("text", "tool", "gui") and spec.target.endswith("#smollm2")
    unnamed = parse_agent_spec(LLM.rpartition("&name=")[0])
    assert unnamed.display_name == "" and unnamed.options == spec.options
    assert spec.config_hash() == unnamed.config_hash()  # a name is not part of what is measured
    named = parse_agent_spec(NAMED_RANDOM)
    assert (named.kind, named.display_name) == ("random", "Random + luck (baseline)")
    assert split_display_name("oracle") == ("oracle", None)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "<b>bold</b>",
        "a|b",
        "`code`",
        'quote"',
        "line\nbreak",
        "tab\there",
        "#anchor",
        " leading space",
        "x" * (MAX_NAME_LENGTH + 1),
        "ünïcode",
    ],
)
def test_a_name_outside_the_allow_list_is_refused(name):
    with pytest.raises(ValueError, match="display name"):
        parse_agent_spec(f"random?name={name}")
    assert display_name(f"random?name={name}") is None


def test_a_second_name_is_refused():
    with pytest.raises(ValueError, match="name= appears 2 times"):
        parse_agent_spec("random?name=a&name=b")


@pytest.fixture(scope="module")
def standings(tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    with ResultsStore(out) as store:
        for agent, score in (
            (NAMED_RANDOM, 0.25),
            (BAD, 0.5),
            ("oracle", 1.0),
            (INJECTED, 0.0),
        ):
            for task in TWO_TASKS:
                for seed in task.seeds:
                    assert store.add(scored_row(agent, task.env_id, seed, score))
        yield compute_standings(store, TWO_TASKS)


def test_markdown_shows_the_name_and_keeps_spec_and_config(standings):
    markdown = render_markdown(standings)
    ranking = markdown.split("## Agents")[0]
    named = next(e for e in standings.entries if e.agent_spec == NAMED_RANDOM)
    assert f"| {named.rank} | Random + luck (baseline) | {named.config_hash[:8]} |" in ranking
    assert NAMED_RANDOM not in ranking
    agents = markdown.split("## Agents")[1].split("\n## ")[0]
    assert (
        f"* Random + luck (baseline) (config {named.config_hash[:8]}): `{NAMED_RANDOM}`" in agents
    )
    # a stored spec with a name outside the allow-list is shown as the spec, in code, not as a name
    assert f"`{BAD}`" in ranking and "\n* <img" not in markdown
    # a stored spec's backtick or pipe cannot close its code span or its table cell
    assert "* Looks fine (config " in agents
    assert "`random' **forged** 'x \\| y?name=Looks fine`" in agents


def test_html_labels_by_name_with_the_full_spec_as_tooltip_and_escapes_a_bad_one(standings):
    page = render_html(standings)
    table = re.search(r'<table id="standings">.*?</table>', page, re.S).group(0)
    assert ">Random + luck (baseline)</span>" in table
    assert 'title="random?name=Random + luck (baseline) (config ' in table
    assert "<img" not in page and "&lt;img" in page
    assert agent_label(NAMED_RANDOM) == "Random + luck (baseline)"
    assert agent_label(BAD) != "<img src=x onerror=alert(1)>"


def test_the_main_job_names_its_llm_rows():
    """scripts/main.sh's LLM rows parse, under the names the standings show (and .ci/run checks)."""
    import pathlib

    script = (pathlib.Path(__file__).parents[2] / "scripts" / "main.sh").read_text()
    # the rows' specs are shell variables (`base="openai:..."`) passed as --agent "$base"
    specs = dict(re.findall(r'^\s*(\w+)="((?:openai|llm):[^"]+)"', script, re.M))
    assert {f'--agent "${variable}"' in script for variable in specs} == {True}, specs
    names = {}
    for variable, text in specs.items():
        text = text.replace("$port", "8765").replace("$adapter", "leaderboards/checkpoints/x")
        # the model files need not be here: the name is checked without the model
        assert split_display_name(text)[1] is not None, text
        names[variable] = display_name(text)
    assert names == {
        "base": "SmolLM2-135M-Instruct",
        "trained": "SmolLM2-135M-Instruct + SFT/GRPO (LoRA)",
    }
    ci = (pathlib.Path(__file__).parents[2] / ".ci" / "run").read_text()
    assert all(f'"{name} |"' in ci for name in names.values())
