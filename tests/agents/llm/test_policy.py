"""TransformersPolicy and the chat formats: batching, stop strings, log-probs, templates."""

from __future__ import annotations

import pytest
import torch

from verigym.agents.llm.chat import ChatFormat, initial_messages
from verigym.agents.llm.policy import TransformersPolicy, resolve_device


def test_greedy_batch_equals_single_prompts(policy):
    """Left padding changes nothing: each prompt's greedy reply is the same alone or in a batch."""
    prompts = [
        policy.encode_messages([{"role": "user", "content": text}])
        for text in ("a", "a much longer prompt", "xyz")
    ]
    batched = policy.generate(prompts, max_new_tokens=6, temperature=0)
    for prompt, together in zip(prompts, batched):
        alone = policy.generate([prompt], max_new_tokens=6, temperature=0)[0]
        assert alone.token_ids == together.token_ids
        assert alone.log_probs == pytest.approx(together.log_probs, abs=1e-4)


def test_log_probs_match_a_full_forward_pass(policy):
    """The log-probs returned while sampling (KV cache) equal a fresh forward over the sequence."""
    prompt = policy.encode_messages([{"role": "user", "content": "hello there"}])
    generator = torch.Generator().manual_seed(3)
    out = policy.generate(
        [prompt, prompt[:5]], max_new_tokens=8, temperature=0.7, generator=generator
    )
    for p, g in zip([prompt, prompt[:5]], out):
        ids = torch.tensor([p + g.token_ids])
        with torch.no_grad():
            logits = policy.model(input_ids=ids).logits[0, len(p) - 1 : -1].float() / 0.7
        expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(g.token_ids)[:, None])[
            :, 0
        ]
        assert g.log_probs == pytest.approx(expected.tolist(), abs=1e-4)


def test_sampling_is_reproducible_with_a_seeded_generator(policy):
    prompt = policy.encode_messages([{"role": "user", "content": "hi"}])
    first = policy.generate(
        [prompt] * 3, max_new_tokens=5, generator=torch.Generator().manual_seed(7)
    )
    second = policy.generate(
        [prompt] * 3, max_new_tokens=5, generator=torch.Generator().manual_seed(7)
    )
    assert [g.token_ids for g in first] == [g.token_ids for g in second]


def test_stop_strings_cut_the_text_and_end_the_reply(policy):
    prompt = policy.encode_messages([{"role": "user", "content": "hi"}])
    free = policy.generate([prompt], max_new_tokens=12, temperature=0)[0]
    visible = free.text
    if len(visible) < 3:
        pytest.skip("the random model ended its reply too early to place a stop string")
    stop = visible[1:3]
    cut = policy.generate([prompt], max_new_tokens=12, temperature=0, stop=[stop])[0]
    assert cut.text == visible[: visible.index(stop)]
    assert cut.finish_reason == "stop"
    assert len(cut.token_ids) < len(free.token_ids) or free.finish_reason == "length"


def test_max_new_tokens_and_finish_reason(policy):
    prompt = policy.encode_messages([{"role": "user", "content": "hi"}])
    out = policy.generate(
        [prompt] * 4, max_new_tokens=3, generator=torch.Generator().manual_seed(0)
    )
    for g in out:
        assert 1 <= len(g.token_ids) == len(g.log_probs) <= 3
        ended = g.token_ids[-1] in policy.eos_token_ids
        assert g.finish_reason == ("stop" if ended else "length")


def test_invalid_sampling_arguments_raise(policy):
    with pytest.raises(ValueError, match="top_p"):
        policy.generate([[1, 2]], top_p=0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        policy.generate([[1, 2]], max_new_tokens=0)
    with pytest.raises(ValueError, match="at least one token"):
        policy.generate([[]])
    with pytest.raises(FileNotFoundError, match="save_pretrained"):
        TransformersPolicy.from_pretrained("/nonexistent/model")


def test_chat_template_and_plain_fallback(policy, tiny_plain_dir):
    template = policy.chat
    assert template.use_template
    text = template.render([{"role": "user", "content": "hi"}])
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    # the continuation after a reply that ended with EOS does not repeat <|im_end|>
    assert (
        template.continuation("next", reply_ended=True)
        == "\n<|im_start|>user\nnext<|im_end|>\n<|im_start|>assistant\n"
    )
    assert template.continuation("next", reply_ended=False).startswith("<|im_end|>\n")
    plain = TransformersPolicy.from_pretrained(tiny_plain_dir, device="cpu").chat
    assert not plain.use_template
    assert (
        plain.render(initial_messages("rules", "obs"))
        == "System: rules\n\nUser: obs\n\nAssistant: "
    )
    assert "\nUser:" in plain.stop_strings
    assert (
        ChatFormat(policy.tokenizer, use_template=False).render([{"role": "user", "content": "x"}])
        == "User: x\n\nAssistant: "
    )


def test_initial_messages_always_give_the_rules_as_system_message():
    # a missing system message lets the template insert the model's default one
    assert initial_messages("rules", "Turn 0. rules") == [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "Turn 0. rules"},
    ]
    assert initial_messages("", "obs") == [{"role": "user", "content": "obs"}]
    assert initial_messages("rules", "obs")[0] == {"role": "system", "content": "rules"}


def test_resolve_device():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_shared_prompts_are_prefilled_once_with_identical_results(policy):
    """A group of identical prompts (GRPO) reuses one prompt forward; outputs equal the unshared run."""
    a = policy.encode_messages([{"role": "user", "content": "say a"}])
    b = policy.encode_messages([{"role": "user", "content": "a longer prompt"}])
    prompts = [a, b, a, a, b]
    calls = []
    handle = policy.model.register_forward_pre_hook(
        lambda module, args, kwargs: calls.append(kwargs["input_ids"].shape), with_kwargs=True
    )
    try:
        shared = policy.generate(
            prompts, max_new_tokens=4, generator=torch.Generator().manual_seed(5)
        )
    finally:
        handle.remove()
    assert calls[0][0] == 2  # one prefill row per distinct prompt
    alone = [policy.generate([p], max_new_tokens=4, temperature=0)[0] for p in prompts]
    greedy = policy.generate(prompts, max_new_tokens=4, temperature=0)
    assert [g.token_ids for g in greedy] == [g.token_ids for g in alone]
    for g, p in zip(shared, prompts):
        ids = torch.tensor([p + g.token_ids])
        with torch.no_grad():
            logits = policy.model(input_ids=ids).logits[0, len(p) - 1 : -1].float()
        expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(g.token_ids)[:, None])[
            :, 0
        ]
        assert g.log_probs == pytest.approx(expected.tolist(), abs=1e-4)


def test_feedback_text_adds_the_action_error_once():
    from verigym.agents.llm.chat import feedback_text

    assert (
        feedback_text("page", {"action_error": "no element 9"})
        == "page\n(Your last action was invalid: no element 9)"
    )
    assert feedback_text("Invalid move: bad", {"action_error": "bad"}) == "Invalid move: bad"
    assert feedback_text("obs", {}) == "obs"


def test_prefix_cache_reuses_earlier_turns_with_identical_results(tiny_model_dir):
    """A prompt that extends a cached one prefills only its new tokens and samples the same replies."""
    plain = TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu")
    cached = TransformersPolicy.from_pretrained(
        tiny_model_dir, device="cpu", prefix_cache_bytes=1 << 24
    )
    first = [
        plain.encode_messages([{"role": "user", "content": text}])
        for text in ("guess a number", "hi")
    ]
    for pol in (plain, cached):
        pol.generate(first, max_new_tokens=4, temperature=0)
    assert len(cached.prefix_cache) == 2 and cached.prefix_cache.reused_tokens == 0
    # the next turn: each conversation grows; a third, unrelated prompt joins the batch
    second = [
        first[0] + plain.chat.encode("ok, lower"),
        first[1] + plain.chat.encode("more"),
        first[1][:3],
    ]
    want = plain.generate(
        second, max_new_tokens=6, temperature=0.8, generator=torch.Generator().manual_seed(5)
    )
    got = cached.generate(
        second, max_new_tokens=6, temperature=0.8, generator=torch.Generator().manual_seed(5)
    )
    assert [g.token_ids for g in got] == [g.token_ids for g in want]
    for g, w in zip(got, want):
        assert g.log_probs == pytest.approx(w.log_probs, abs=1e-4)
    assert cached.prefix_cache.reused_tokens == len(first[0]) + len(
        first[1]
    )  # the short one: no stored prefix
    # an exact repeat reuses all but the last token
    again = cached.generate([second[0]], max_new_tokens=6, temperature=0)[0]
    assert (
        again.token_ids == plain.generate([second[0]], max_new_tokens=6, temperature=0)[0].token_ids
    )


def test_prefix_cache_is_bounded_and_dropped_when_weights_change(tiny_model_dir):
    pol = TransformersPolicy.from_pretrained(
        tiny_model_dir, device="cpu", prefix_cache_bytes=1 << 24
    )
    prompt = pol.encode_messages([{"role": "user", "content": "hello"}])
    pol.generate([prompt], max_new_tokens=2, temperature=0)
    one = pol.prefix_cache.bytes
    assert one > 0 and len(pol.prefix_cache) == 1
    with torch.no_grad():  # an in-place update, as an optimizer step makes
        next(pol.model.parameters()).add_(0.5)
    before = pol.prefix_cache.reused_tokens
    pol.generate([prompt + prompt], max_new_tokens=2, temperature=0)
    assert pol.prefix_cache.reused_tokens == before  # stale entry dropped, nothing reused
    small = TransformersPolicy(pol.model, pol.tokenizer, prefix_cache_bytes=int(one * 2.5))
    for text in ("a", "b", "c", "d"):  # same length prompts: at most two fit
        small.generate(
            [small.encode_messages([{"role": "user", "content": text * 3}])],
            max_new_tokens=1,
            temperature=0,
        )
    assert len(small.prefix_cache) == 2 and small.prefix_cache.bytes <= small.prefix_cache.max_bytes


def test_prefix_cache_keeps_one_entry_per_conversation():
    """Storing a turn drops the stored earlier turns of that conversation (a start of it, under the
    same adapter), so ~20 episodes in flight fit without the LRU evicting every conversation."""
    from verigym.agents.llm.policy import PrefixCache

    def layers(n):  # one layer of [kv_heads=1, n, head_dim=2] float32: 16 bytes a token
        return [(torch.zeros(1, n, 2), torch.zeros(1, n, 2))]

    cache = PrefixCache(1 << 20)
    system = list(range(40))  # the shared system prompt (>= MIN_SHARED tokens)
    turn1, other = system + [100, 101], system + [200]
    for prompt in (turn1, other):
        cache.put(prompt, layers(len(prompt)))
    cache.put(turn1, layers(len(turn1)), adapter="lora")  # another adapter's entry stays
    turn2 = turn1 + [102, 103, 104]
    cache.put(turn2, layers(len(turn2)))
    stored = [(owner, list(key)) for owner, key in cache._entries]
    assert stored == [("", other), ("lora", turn1), ("", turn2)]
    assert cache.bytes == 16 * (len(other) + len(turn1) + len(turn2))
    # what the dropped entry served is served by its successor
    assert cache.longest(turn1 + [999])[0] == len(turn1)
    assert cache.longest(system + [300])[0] == len(system)
