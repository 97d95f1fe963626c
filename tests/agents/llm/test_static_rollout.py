"""The static-shape GRPO rollout (verigym.agents.llm.static_rollout) on a tiny model."""

from __future__ import annotations

import pytest
import torch

from verigym.agents.llm.static_rollout import StaticRollout

PROMPTS = ("User: hi\nAssistant:", "User: a longer question, please?\nAssistant:")


def static_rollout(policy, prompts, group_size, *, bucket_size=64, batch_size=None, **options):
    """One call of a fresh engine (``compile`` and ``bf16`` go to the engine, the rest to the call)."""
    engine_options = {k: options.pop(k) for k in ("compile", "bf16") if k in options}
    engine = StaticRollout(policy, bucket_size=bucket_size, batch_size=batch_size, **engine_options)
    return engine(prompts, group_size, **options)


def _prompts(policy):
    return [policy.tokenizer.encode(text) for text in PROMPTS]


def test_greedy_matches_generate(policy):
    prompts = _prompts(policy)
    assert len(prompts[0]) != len(prompts[1])
    groups = static_rollout(policy, prompts, 3, max_new_tokens=12, temperature=0, bucket_size=16)
    expected = policy.generate(prompts, max_new_tokens=12, temperature=0)
    assert [len(g) for g in groups] == [3, 3]
    for group, reference in zip(groups, expected):
        assert len(reference.token_ids) >= 2
        for reply in group:
            assert reply.token_ids == reference.token_ids
            assert reply.finish_reason == reference.finish_reason
            assert reply.text == reference.text


def test_seeded_samples_match_generate(policy):
    """The same seed draws the same tokens as ``generate`` over the prompts repeated G times (both
    sample every row of the batch in one call per step; no row ends early here)."""
    prompts = _prompts(policy)
    groups = static_rollout(
        policy, prompts, 3, max_new_tokens=8, generator=torch.Generator().manual_seed(3)
    )
    expected = policy.generate(
        [p for p in prompts for _ in range(3)],
        max_new_tokens=8,
        generator=torch.Generator().manual_seed(3),
    )
    replies = [reply for group in groups for reply in group]
    assert all(r.finish_reason == "length" for r in expected)
    assert [r.token_ids for r in replies] == [r.token_ids for r in expected]
    torch.testing.assert_close(
        torch.tensor([r.log_probs for r in replies]),
        torch.tensor([r.log_probs for r in expected]),
        atol=1e-5,
        rtol=1e-5,
    )


def test_rows_end_at_eos_and_the_rest_step_on(policy, monkeypatch):
    prompts = _prompts(policy)

    def run():
        generator = torch.Generator().manual_seed(5)
        groups = static_rollout(policy, prompts, 3, max_new_tokens=8, generator=generator)
        return [reply for group in groups for reply in group]

    free = run()
    eos = free[0].token_ids[3]
    monkeypatch.setattr(policy, "eos_token_ids", frozenset({eos}))
    ended = run()
    assert ended[0].token_ids == free[0].token_ids[:4] and ended[0].finish_reason == "stop"
    for a, b in zip(free, ended):  # the same draws, each cut after its first EOS
        n = a.token_ids.index(eos) + 1 if eos in a.token_ids else len(a.token_ids)
        assert b.token_ids == a.token_ids[:n]
        assert b.log_probs == a.log_probs[:n]
        assert b.finish_reason == ("stop" if eos in a.token_ids else "length")
    assert any(len(r.token_ids) == 8 for r in ended)  # some rows went on past the first's end


def test_one_prefill_of_the_distinct_prompts_then_one_call_per_step(policy):
    prompts = _prompts(policy)
    shapes = []
    hook = policy.model.register_forward_pre_hook(
        lambda module, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)),
        with_kwargs=True,
    )
    try:
        groups = static_rollout(
            policy, prompts, 3, max_new_tokens=5, temperature=0, bucket_size=16, batch_size=8
        )
    finally:
        hook.remove()
    steps = max(len(r.token_ids) for g in groups for r in g) - 1
    bucket = -(-max(len(p) for p in prompts) // 16) * 16
    assert steps >= 1
    assert shapes == [(2, bucket)] + [(8, 1)] * steps  # one prefill forward of the 2 prompts


def _stops_in(policy, prompts):
    """Stop strings that greedy replies to ``prompts`` contain: one character (one token of the
    character-level tokenizer) and two (a stop string split across tokens)."""
    free = policy.generate(prompts, max_new_tokens=12, temperature=0)
    first, second = free[0].text, free[1].text
    assert len(first) >= 6 and len(second) >= 4
    return [first[3], second[2:4]]


@pytest.mark.parametrize("check_every", [1, 3, 16])
def test_stop_strings_match_generate_greedy(policy, check_every):
    prompts = _prompts(policy) + [policy.tokenizer.encode("User: 12345\nAssistant:")]
    stop = _stops_in(policy, prompts)
    engine = StaticRollout(policy, bucket_size=16, check_every=check_every)
    replies = engine.generate(prompts, max_new_tokens=12, temperature=0, stop=stop)
    expected = policy.generate(prompts, max_new_tokens=12, temperature=0, stop=stop)
    assert [r.finish_reason for r in expected][:2] == ["stop", "stop"]
    assert len(expected[1].token_ids) < 12  # the two-character stop ended row 1 early
    for reply, reference in zip(replies, expected):
        assert reply.token_ids == reference.token_ids
        assert reply.text == reference.text
        assert reply.finish_reason == reference.finish_reason
        torch.testing.assert_close(
            torch.tensor(reply.log_probs), torch.tensor(reference.log_probs), atol=1e-5, rtol=1e-5
        )


def test_a_seeded_row_with_stop_strings_matches_generate(policy):
    """One row: the same draws as ``generate`` (which has no other row to drop), cut the same."""
    (prompt,) = _prompts(policy)[:1]

    def both(stop):
        options = dict(max_new_tokens=10, stop=stop)
        ours = StaticRollout(policy).generate(
            [prompt], generator=torch.Generator().manual_seed(11), **options
        )
        theirs = policy.generate([prompt], generator=torch.Generator().manual_seed(11), **options)
        return ours[0], theirs[0]

    free, _ = both(())
    stop = [policy.tokenizer.decode(free.token_ids[4:6])]
    ours, theirs = both(stop)
    assert theirs.finish_reason == "stop" and len(theirs.token_ids) <= 6
    assert (ours.token_ids, ours.text, ours.finish_reason) == (
        theirs.token_ids,
        theirs.text,
        theirs.finish_reason,
    )
    torch.testing.assert_close(torch.tensor(ours.log_probs), torch.tensor(theirs.log_probs))


def test_seeded_rows_end_at_a_stop_string_and_the_rest_step_on(policy):
    prompts = _prompts(policy)

    def run(stop):
        generator = torch.Generator().manual_seed(5)
        engine = StaticRollout(policy, check_every=4)
        return engine.generate(
            [p for p in prompts for _ in range(3)], max_new_tokens=8, generator=generator, stop=stop
        )

    free = run(())
    token = free[0].token_ids[3]
    stop = policy.tokenizer.decode([token])
    ended = run([stop])
    assert ended[0].token_ids == free[0].token_ids[:4] and ended[0].finish_reason == "stop"
    assert ended[0].text == policy.tokenizer.decode(free[0].token_ids[:3])
    for a, b in zip(free, ended):  # the same draws, each cut after its first stop string
        n = a.token_ids.index(token) + 1 if token in a.token_ids else len(a.token_ids)
        assert b.token_ids == a.token_ids[:n] and b.log_probs == a.log_probs[:n]
        assert b.finish_reason == ("stop" if token in a.token_ids else "length")
    assert any(len(r.token_ids) == 8 for r in ended)


@pytest.mark.parametrize("bf16", [False, True])
def test_log_probs_match_a_full_forward(policy, bf16):
    prompts = _prompts(policy)
    generator = torch.Generator().manual_seed(0)
    groups = static_rollout(policy, prompts, 3, max_new_tokens=8, generator=generator, bf16=bf16)
    tolerance = 5e-2 if bf16 else 1e-4
    for prompt, group in zip(prompts, groups):
        for reply in group:
            ids = torch.tensor([list(prompt) + reply.token_ids])
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                logits = policy.model(input_ids=ids).logits[0].float()
            log_p = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
            expected = log_p.gather(-1, torch.tensor(reply.token_ids)[:, None])[:, 0]
            torch.testing.assert_close(
                torch.tensor(reply.log_probs), expected, atol=tolerance, rtol=tolerance
            )


def test_seeded_samples_repeat(policy):
    prompts = _prompts(policy)

    def run():
        generator = torch.Generator().manual_seed(7)
        groups = static_rollout(policy, prompts, 3, max_new_tokens=8, generator=generator)
        return [[(r.token_ids, r.log_probs) for r in g] for g in groups]

    first = run()
    assert first == run()
    assert len({tuple(ids) for g in first for ids, _ in g}) > 1  # the samples do differ


def test_bad_arguments_are_refused(policy):
    prompts = _prompts(policy)
    with pytest.raises(ValueError, match="CUDA"):
        static_rollout(policy, prompts, 2, compile=True)
    with pytest.raises(ValueError, match="batch_size"):
        static_rollout(policy, prompts, 2, batch_size=3)
    with pytest.raises(ValueError):
        static_rollout(policy, [[]], 2)


def test_a_kept_engine_reuses_its_cache(policy):
    """Calls of one StaticRollout (the same shapes: its cache and step are reused, stale keys and
    values included) sample what fresh ones do."""
    prompts = _prompts(policy)
    engine = StaticRollout(policy, bucket_size=64, batch_size=8)
    calls = [(prompts, 3, 1), (prompts[:1], 2, 2), (prompts[::-1], 3, 3)]
    for chosen, group_size, seed in calls:
        options = dict(max_new_tokens=6, generator=torch.Generator().manual_seed(seed))
        kept = engine(chosen, group_size, **options)
        options["generator"] = torch.Generator().manual_seed(seed)
        fresh = static_rollout(policy, chosen, group_size, batch_size=8, **options)
        assert [[r.token_ids for r in g] for g in kept] == [[r.token_ids for r in g] for g in fresh]
    assert len(engine._engines) == 1


def test_the_decode_step_is_one_graph_for_every_call_of_a_cache_shape(policy):
    """What ``compile=True`` captures, traced on the CPU (dynamo, no code generation): the whole
    step is one graph (``fullgraph``: no graph break), and calls whose prompt buckets differ but
    whose cache length is the same reuse it (no recompilation)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    class Traced(StaticRollout):
        def _compiled(self, step):
            return torch.compile(step, backend="eager", fullgraph=True)

    torch._dynamo.reset()
    counters.clear()
    try:
        engine = Traced(policy, bucket_size=8, batch_size=8)
        prompts = _prompts(policy)
        longer = [policy.tokenizer.encode("User: " + "x" * 35 + "\nAssistant:")]
        assert max(len(p) for p in prompts) <= 48 < len(longer[0]) <= 56  # buckets 48 and 56
        traced = engine(prompts, 3, max_new_tokens=6, temperature=0)
        engine(longer, 4, max_new_tokens=6, temperature=0)
        assert len(engine._engines) == 1  # one cache length (64) for both buckets
        assert counters["stats"]["unique_graphs"] == 1
        assert not counters["graph_break"]
    finally:
        torch._dynamo.reset()
    eager = static_rollout(
        policy, prompts, 3, max_new_tokens=6, temperature=0, bucket_size=8, batch_size=8
    )
    assert [[r.token_ids for r in g] for g in traced] == [[r.token_ids for r in g] for g in eager]


@pytest.mark.slow
def test_the_decode_step_compiles_with_inductor_on_the_cpu(policy):
    """The step as ``torch.compile`` lowers it (inductor's default mode, C++ on the CPU; the GPU
    adds CUDA graphs) samples what the eager step samples, under bf16 autocast (GRPO's rollouts)
    too (~15 s of compilation per dtype: slow)."""
    import shutil

    if shutil.which("g++") is None:
        pytest.skip("inductor on the CPU needs a C++ compiler")

    class Inductor(StaticRollout):
        def _compiled(self, step):
            return torch.compile(step)

    with torch.no_grad():  # sharper logits: greedy replies that vary with the context
        for name, parameter in policy.model.named_parameters():
            if "norm" not in name:
                parameter.mul_(16)
    prompts = _prompts(policy)
    for bf16 in (False, True):
        replies = []
        for engine in (StaticRollout(policy, bf16=bf16), Inductor(policy, bf16=bf16)):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                groups = engine(prompts, 2, max_new_tokens=8, temperature=0)
            replies.append([[r.token_ids for r in g] for g in groups])
        assert replies[0] == replies[1]
        assert (
            len({tuple(ids) for g in replies[0] for ids in g}) == 2
        )  # the prompts' replies differ


@pytest.mark.gpu
def test_gpu_compiled_step_matches_eager(tiny_model_dir):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from verigym.agents.llm.policy import TransformersPolicy

    policy = TransformersPolicy.from_pretrained(tiny_model_dir, device="cuda", dtype=torch.float32)
    prompts = _prompts(policy)
    eager = static_rollout(policy, prompts, 3, max_new_tokens=8, temperature=0)
    compiled = StaticRollout(policy, compile=True)
    for _ in range(3):  # the later calls replay the captured CUDA graphs
        replies = compiled(prompts, 3, max_new_tokens=8, temperature=0)
        assert [[r.token_ids for r in g] for g in replies] == [
            [r.token_ids for r in g] for g in eager
        ]
