"""scripts/llm_demos.py: the SPEC grammar of the trained LLM row's curriculum stages."""

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "scripts" / "llm_demos.py"
_spec = importlib.util.spec_from_file_location("llm_demos", _PATH)
llm_demos = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(llm_demos)


def test_spec_with_level_kwargs():
    env_id, kwargs, seeds = llm_demos.parse_spec("verigym/Calculator-v0?difficulty=1&x=-2:5:40")
    assert (env_id, kwargs, seeds) == (
        "verigym/Calculator-v0",
        {"difficulty": 1, "x": -2},
        range(5, 40),
    )


def test_spec_without_kwargs():
    assert llm_demos.parse_spec("verigym/Login-v0:0:14") == ("verigym/Login-v0", {}, range(0, 14))


@pytest.mark.parametrize(
    "text",
    [
        "verigym/Login-v0:0",  # no END
        "Login-v0:0:5",  # not a verigym id
        "verigym/Calculator-v0?difficulty=one:0:5",  # kwargs are integers only
        "verigym/Calculator-v0?__class__=1:0:5",  # names are lower-case words
        "verigym/Login-v0:0:5; rm -rf /",
    ],
)
def test_bad_spec_is_refused(text):
    with pytest.raises(ValueError, match="bad SPEC"):
        llm_demos.parse_spec(text)


def test_name_the_element_precedes_each_click_and_type_with_the_element_it_acts_on():
    observation = 'Task: Click the button "Jade".\nElements:\n[0] button "Sage" @(1,2,3,4)\n[3] button "Jade" @(5,6,7,8)'
    record = {
        "messages": [
            {"role": "system", "content": "..."},
            {"role": "user", "content": observation},
            {"role": "assistant", "content": "click 3"},
            {
                "role": "user",
                "content": observation.replace('[3] button "Jade"', '[3] textbox "Name"'),
            },
            {"role": "assistant", "content": 'type 3 "Ada \\"Lovelace\\""'},
            {"role": "user", "content": "no elements here"},
            {"role": "assistant", "content": "click 1"},  # no element line [1]: kept as it is
            {"role": "assistant", "content": "done"},
        ],
        "env_id": "verigym/ClickButton-v0",
    }
    named = llm_demos.name_the_element(record)
    replies = [m["content"] for m in named["messages"] if m["role"] == "assistant"]
    assert replies == [
        'Button "Jade" is [3].\nclick 3',
        'Textbox "Name" is [3].\ntype 3 "Ada \\"Lovelace\\""',
        "click 1",
        "done",
    ]
    assert named["env_id"] == record["env_id"] and record["messages"][2]["content"] == "click 3"
