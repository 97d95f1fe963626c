"""scripts/llm_demos.py: the SPEC grammar of the trained LLM row's curriculum stages, and the replies it rewrites."""

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


def test_work_steps_reduce_one_operation_at_a_time_to_reasoning_gyms_answer():
    from reasoning_gym.arithmetic.basic_arithmetic import eval_floordiv

    assert llm_demos.work_steps("9 + -8") == ["9 + -8", "1"]  # -8 is a number, not an operation
    assert llm_demos.work_steps("-( 3 - -1 )") == ["-( 3 - -1 )", "-( 4 )", "-4"]
    assert llm_demos.work_steps("2 * -9 - -9 / 3") == [
        "2 * -9 - -9 / 3",
        "-18 - -9 / 3",
        "-18 - -3",
        "-15",
    ]
    # / is floor division (reasoning-gym's eval_floordiv), redundant parentheses are dropped
    for expression in [
        "( -8247 / 3 ) / -( -1484 + 2503 + -6472 + -5452 )",
        "( ( 64 - -49 * 99 ) )",
    ]:
        steps = llm_demos.work_steps(expression)
        assert steps[0] == expression and int(steps[-1]) == eval_floordiv(expression)
    assert llm_demos.work_steps("( ( 64 - -49 * 99 ) )")[1] == "64 - -4851"
    for text in ["2 ** 3", "x + 1", "1.5 + 2", "__import__('os')", "1 % 2"]:
        with pytest.raises(ValueError):
            llm_demos.work_steps(text)


def test_show_work_reasons_before_a_right_answer_only():
    def record(question: str, reply: str) -> dict:
        return {
            "messages": [
                {"role": "user", "content": f"Calculate {question}.\n\nGive it."},
                {"role": "assistant", "content": reply},
            ]
        }

    shown = llm_demos.show_work(record("9 + 7", "<answer>16</answer>"))
    assert shown["messages"][1]["content"] == "<think>9 + 7 = 16</think>\n<answer>16</answer>"
    for kept in [
        record("9 + 7", "<answer>15</answer>"),  # not the value: left alone
        record("9 +", "<answer>9</answer>"),  # does not parse
        record("4 / 0", "<answer>0</answer>"),  # no value
        {
            "messages": [
                {"role": "user", "content": "Guess"},
                {"role": "assistant", "content": "<answer>50</answer>"},
            ]
        },
    ]:
        assert llm_demos.show_work(kept) == kept
