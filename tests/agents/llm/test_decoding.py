"""The shared decoding step (verigym.agents.llm.decoding.Decoder): rows that join a running batch
between steps, and leave it when done or dropped, get exactly the tokens they get alone."""

from __future__ import annotations

import pytest
import torch


def _prompts(policy, texts):
    return [policy.encode_messages([{"role": "user", "content": text}]) for text in texts]


def test_rows_joining_and_leaving_mid_batch_get_the_tokens_they_get_alone(policy):
    """Greedy, staggered: a short prompt first, a longer one (the batch's cache widens on the left)
    two steps later, two more with a stop string and a sampled neighbour after that; each row's
    reply is the one ``generate`` gives its prompt alone."""
    prompts = _prompts(policy, ("a", "a much longer prompt than the others", "xyz", "hi there"))
    budgets = [12, 6, 9, 4]
    alone = [
        policy.generate([p], max_new_tokens=n, temperature=0)[0] for p, n in zip(prompts, budgets)
    ]
    stop = alone[2].text[3:5]  # a stop string the third reply meets
    assert stop and stop in alone[2].text
    alone[2] = policy.generate([prompts[2]], max_new_tokens=9, temperature=0, stop=[stop])[0]
    assert alone[2].finish_reason == "stop"
    decoder = policy.decoder()
    keys: dict[int, int] = {}
    got = {}
    generator = torch.Generator().manual_seed(0)
    for step in range(40):
        if step == 0:
            keys[decoder.add([prompts[0]], max_new_tokens=12, temperature=0)[0]] = 0
        if step == 2:
            assert len(decoder) == 1  # it joins a batch that is decoding
            keys[decoder.add([prompts[1]], max_new_tokens=6, temperature=0)[0]] = 1
        if step == 3:
            more = decoder.add(
                [prompts[2], prompts[3]], max_new_tokens=9, temperature=0, stop=[stop]
            )
            keys[more[0]], keys[more[1]] = 2, -3
            noise = decoder.add(
                [prompts[3]], max_new_tokens=30, temperature=1.0, generator=generator
            )
            keys[noise[0]] = -1
            dropped = decoder.add([prompts[0]], max_new_tokens=30, temperature=0)[0]
            keys[dropped] = -2
        if step == 5:
            (partial,) = decoder.drop([dropped])
            assert partial[0] == dropped and len(partial[1].token_ids) == 2
            assert partial[1].finish_reason == "length"
        if step == 6:
            keys[decoder.add([prompts[3]], max_new_tokens=4, temperature=0)[0]] = 3
        for key, reply in decoder.step():
            got[keys[key]] = reply
    assert len(decoder) == 0
    for i in range(4):
        assert got[i].token_ids == alone[i].token_ids, i
        assert got[i].text == alone[i].text and got[i].finish_reason == alone[i].finish_reason
        assert got[i].log_probs == pytest.approx(alone[i].log_probs, abs=1e-4)
    assert len(got[-1].token_ids) <= 30


def test_prefix_cache_reuses_a_shared_start_of_another_prompt(tiny_model_dir):
    """Two episodes of one task share their system prompt: the second prefills only what follows
    the shared start, and its greedy reply is the one it gets without a cache."""
    from verigym.agents.llm.policy import TransformersPolicy

    cached = TransformersPolicy.from_pretrained(
        tiny_model_dir, device="cpu", prefix_cache_bytes=1 << 24
    )
    plain = TransformersPolicy(cached.model, cached.tokenizer)
    rules = "you play a game. " * 6
    first, second = (
        cached.encode_messages(
            [{"role": "system", "content": rules}, {"role": "user", "content": text}]
        )
        for text in ("guess 12", "guess 7?")
    )
    shared = next(i for i, (a, b) in enumerate(zip(first, second)) if a != b)
    assert shared >= 64
    cached.generate([first], max_new_tokens=2, temperature=0)
    assert cached.prefix_cache.reused_tokens == 0
    got = cached.generate([second], max_new_tokens=6, temperature=0)[0]
    assert cached.prefix_cache.reused_tokens == shared
    assert got.token_ids == plain.generate([second], max_new_tokens=6, temperature=0)[0].token_ids


def test_a_running_batch_writes_each_step_s_keys_in_place():
    """The decoder's cache layers keep headroom: a step writes its keys and values into the buffer
    (no copy of the batch's whole cache, which Hugging Face's concatenating layer made every step)
    and returns exactly what concatenation returns; setting keys/values (a merge or trim) and
    outgrowing the headroom reallocate."""
    from transformers import DynamicCache

    from verigym.agents.llm.decoding import _HEADROOM, _with_headroom

    g = torch.Generator().manual_seed(0)
    keys, values = torch.randn(2, 3, 5, 4, generator=g), torch.randn(2, 3, 5, 4, generator=g)
    cache = DynamicCache([(keys.clone(), values.clone())])
    _with_headroom(cache)
    layer = cache.layers[0]
    assert torch.equal(layer.keys, keys) and cache.get_seq_length() == 5
    storage = None
    for step in range(_HEADROOM + 2):
        k, v = torch.randn(2, 3, 1, 4, generator=g), torch.randn(2, 3, 1, 4, generator=g)
        got_k, got_v = layer.update(k, v)
        keys, values = torch.cat([keys, k], dim=-2), torch.cat([values, v], dim=-2)
        assert torch.equal(got_k, keys) and torch.equal(got_v, values)
        if step == 1:
            storage = got_k.untyped_storage().data_ptr()
        elif 1 < step <= _HEADROOM:  # within the headroom: the same buffer
            assert got_k.untyped_storage().data_ptr() == storage
    assert got_k.untyped_storage().data_ptr() != storage  # past the headroom: a bigger one
    assert cache.get_seq_length() == 5 + _HEADROOM + 2
    layer.keys, layer.values = keys[:1, :, 3:], values[:1, :, 3:]  # a trim: rows and columns
    assert torch.equal(layer.keys, keys[:1, :, 3:]) and cache.get_seq_length() == keys.shape[2] - 3
    k, v = torch.randn(1, 3, 1, 4, generator=g), torch.randn(1, 3, 1, 4, generator=g)
    got_k, got_v = layer.update(k, v)
    assert torch.equal(got_k, torch.cat([keys[:1, :, 3:], k], dim=-2))
    assert torch.equal(got_v, torch.cat([values[:1, :, 3:], v], dim=-2))


def test_decoder_greedy_tokens_equal_full_forward_argmax(policy, monkeypatch):
    """The in-place cache gives the tokens of a no-cache forward over the whole sequence each step,
    for two rows of different lengths decoding together (left padding, headroom crossed twice)."""
    from verigym.agents.llm import decoding

    monkeypatch.setattr(decoding, "_HEADROOM", 3)
    prompts = _prompts(policy, ("a", "a longer prompt here"))
    decoder = policy.decoder()
    keys = decoder.add(prompts, max_new_tokens=10, temperature=0)
    got: dict[int, list[int]] = {}
    while len(decoder):
        for key, reply in decoder.step():
            got[key] = reply.token_ids
    eos = set(policy.eos_token_ids)
    with torch.no_grad():
        for key, prompt in zip(keys, prompts):
            ids = list(prompt)
            for token in got[key]:
                logits = policy.model(input_ids=torch.tensor([ids])).logits[0, -1]
                assert int(logits.argmax()) == token
                if token in eos:
                    break
                ids.append(token)
