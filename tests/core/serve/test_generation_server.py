"""gem_core.serve.generation_server: vLLM's routes on a tiny CPU model, bounded, and the CPU weight stream.

(TRL's own worker and trainer against this server: tests/adapters/trl/test_async_rollout_worker_server.py.)
"""

from __future__ import annotations

import copy
import threading

import httpx
import pytest
import torch

from gem_core.serve.generation_server import GenerationServer, GenerationServerConfig
from gem_core.serve.weight_stream import WeightSender
from gem_core.testing import make_model


@pytest.fixture
def served(tiny_tokenizer):
    model = copy.deepcopy(make_model(tiny_tokenizer, seed=0))  # weight updates write into it
    with GenerationServer(model, tiny_tokenizer, GenerationServerConfig(max_model_len=64, max_body_bytes=4096)) as server:
        yield server, httpx.Client(base_url=server.url, timeout=60)


def prompt_ids(tokenizer):
    return tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, return_dict=False)


def test_a_completion_returns_its_token_ids_with_their_logprobs_capped_by_max_model_len(served, tiny_tokenizer):
    server, client = served
    prompt = prompt_ids(tiny_tokenizer)
    answer = client.post("/v1/completions", json={"prompt": prompt, "max_tokens": 1000, "logprobs": 0, "return_token_ids": True,
                                                  "seed": 7, "top_k": -1, "temperature": 1.0, "repetition_penalty": 1.0})
    assert answer.status_code == 200, answer.text
    choice = answer.json()["choices"][0]
    ids, logprobs = choice["token_ids"], choice["logprobs"]["token_logprobs"]
    assert 0 < len(ids) <= 64 - len(prompt) and len(logprobs) == len(ids) and choice["prompt_token_ids"] == prompt
    # The log-probs are the served model's, token for token.
    with torch.no_grad():
        logits = server.model(input_ids=torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1].log_softmax(-1)
    assert torch.allclose(logits.gather(1, torch.tensor(ids)[:, None])[:, 0], torch.tensor(logprobs), atol=1e-4)
    assert client.get("/v1/models").json()["data"][0]["max_model_len"] == 64
    assert client.get("/health").status_code == 200


@pytest.mark.parametrize("body, status, words", [
    ({"prompt": [10**9]}, 400, "token ids"),
    ({"prompt": [1, 2], "n": 2}, 400, "'n'"),
    ({"prompt": [1, 2], "repetition_penalty": 1.3}, 400, "repetition_penalty"),
    ({"prompt": [1, 2], "min_p": 0.1}, 400, "min_p"),
    ({"prompt": [1] * 64}, 400, "max_model_len"),
    ({"prompt": [1, 2], "max_tokens": 0}, 400, "max_tokens"),
    ({"prompt": [1] * 5000}, 413, "over 4096 bytes"),
])
def test_bad_or_oversized_completion_requests_are_refused_with_the_reason(served, body, status, words):
    _, client = served
    answer = client.post("/v1/completions", json=body)
    assert answer.status_code == status and words in answer.json()["error"]["message"]


def test_a_paused_server_holds_new_completions_until_resume(served, tiny_tokenizer):
    server, client = served
    assert client.post("/pause", params={"mode": "keep"}).status_code == 200
    done = []
    request = threading.Thread(target=lambda: done.append(client.post("/v1/completions", json={"prompt": prompt_ids(tiny_tokenizer), "max_tokens": 2})))
    request.start()
    request.join(0.5)
    assert request.is_alive() and server.completions_served == 0
    assert client.post("/resume").status_code == 200
    request.join(60)
    assert done[0].status_code == 200 and server.completions_served == 1


def weight_manifest(model):
    named = list(model.named_parameters())
    return named, {"names": [n for n, _ in named], "dtype_names": [str(p.dtype).split(".")[-1] for _, p in named],
                   "shapes": [list(p.shape) for _, p in named]}


def join(client, sender):
    accepted = threading.Thread(target=sender.accept)
    accepted.start()
    answer = client.post("/init_weight_transfer_engine", json={"init_info": {"master_address": "127.0.0.1", "master_port": sender.port}})
    accepted.join(30)
    assert answer.status_code == 200, answer.text


def test_a_weight_update_over_the_cpu_stream_replaces_the_served_weights(served, tiny_tokenizer):
    server, client = served
    new = make_model(tiny_tokenizer, seed=1)
    named, manifest = weight_manifest(new)
    sender = WeightSender()
    join(client, sender)
    assert client.post("/update_weights", json={"update_info": manifest}).status_code == 409  # not paused
    assert client.post("/pause").status_code == 200 and client.post("/start_weight_update", json={}).status_code == 200
    sending = threading.Thread(target=sender.send, args=(named,))
    sending.start()
    assert client.post("/update_weights", json={"update_info": manifest}).status_code == 200
    sending.join(30)
    assert client.post("/finish_weight_update").status_code == 200 and client.post("/resume").status_code == 200
    assert server.weight_version == 1
    assert all(torch.equal(p, q) for p, q in zip(server.model.parameters(), new.parameters()))
    sender.close()


def test_a_stream_sending_what_the_manifest_does_not_name_is_refused_and_must_rejoin(served, tiny_tokenizer):
    server, client = served
    before = [p.clone() for p in server.model.parameters()]
    named, manifest = weight_manifest(make_model(tiny_tokenizer, seed=1))
    sender = WeightSender()
    join(client, sender)
    client.post("/start_weight_update", json={})
    unknown = client.post("/update_weights", json={"update_info": {**manifest, "names": ["nope"] + manifest["names"][1:]}})
    assert unknown.status_code == 400 and "'nope'" in unknown.json()["error"]["message"]
    # A refused manifest closes the stream too (what the trainer sent beside it must not be read as the next update).
    assert client.post("/update_weights", json={"update_info": manifest}).status_code == 409
    sender.close()
    sender = WeightSender()
    join(client, sender)
    refused = []

    def send_a_stray_tensor():
        try:
            sender.send([("lm_head.weight.extra", named[0][1])])
        except OSError as error:  # the server hung up on the stray tensor
            refused.append(error)

    sending = threading.Thread(target=send_a_stray_tensor)
    sending.start()
    answer = client.post("/update_weights", json={"update_info": manifest})
    sending.join(30)
    assert answer.status_code == 400 and "does not name" in answer.json()["error"]["message"]
    assert client.post("/update_weights", json={"update_info": manifest}).status_code == 409  # the stream is closed
    assert all(torch.equal(p, q) for p, q in zip(server.model.parameters(), before))
    sender.close()


def send_quietly(sender, named):
    """Send in a thread, as a trainer does beside its HTTP call; a server that hung up just ends it."""

    def send():
        try:
            sender.send(named)
        except OSError:
            pass

    sending = threading.Thread(target=send)
    sending.start()
    return sending


def test_a_manifest_whose_shape_or_dtype_differs_from_the_parameter_is_a_400_naming_it_and_the_stream_must_rejoin(served, tiny_tokenizer):
    server, client = served
    before = [p.clone() for p in server.model.parameters()]
    new = make_model(tiny_tokenizer, seed=1)
    named, manifest = weight_manifest(new)
    name, shape = named[0][0], list(named[0][1].shape)
    assert client.post("/pause").status_code == 200
    for field, value, tensor, words in (
        ("shapes", [3], torch.zeros(3), f"{name!r} has shape {shape}; the manifest says [3]"),
        ("shapes", ["a"], named[0][1], f"{name!r} has shape {shape}; the manifest says ['a']"),
        ("dtype_names", "int64", torch.zeros(shape, dtype=torch.int64), f"{name!r} is torch.float32; the manifest says 'int64'"),
    ):
        sender = WeightSender(timeout=30)
        join(client, sender)
        assert client.post("/start_weight_update", json={}).status_code == 200
        sending = send_quietly(sender, [(name, tensor)])
        answer = client.post("/update_weights", json={"update_info": {**manifest, field: [value] + manifest[field][1:]}})
        sending.join(30)
        message = answer.json()["error"]["message"]
        assert answer.status_code == 400 and words in message and "call /init_weight_transfer_engine again" in message, answer.text
        # Closed: what the trainer sent for the refused update is never read as the next one.
        assert client.post("/update_weights", json={"update_info": manifest}).status_code == 409
        sender.close()
    assert all(torch.equal(p, q) for p, q in zip(server.model.parameters(), before, strict=True))
    sender = WeightSender(timeout=30)
    join(client, sender)
    sending = send_quietly(sender, named)
    assert client.post("/update_weights", json={"update_info": manifest}).status_code == 200
    sending.join(30)
    assert all(torch.equal(p, q) for p, q in zip(server.model.parameters(), new.parameters(), strict=True))
    sender.close()


def test_the_command_serves_a_local_model_until_ctrl_c(tmp_path, tiny_tokenizer, capsys):
    import re
    import signal
    import subprocess
    import sys

    from gem_core.serve.generation_server import main

    assert main(["--model", str(tmp_path / "nope")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "not a directory" in error
    make_model(tiny_tokenizer, seed=0).save_pretrained(tmp_path / "model")
    tiny_tokenizer.save_pretrained(tmp_path / "model")
    process = subprocess.Popen([sys.executable, "-m", "gem_core.serve.generation_server", "--model", str(tmp_path / "model"), "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = re.search(r"http://127\.0\.0\.1:\d+", process.stdout.readline()).group(0)
        assert httpx.get(url + "/health", timeout=30).status_code == 200
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0
    finally:
        process.kill()
